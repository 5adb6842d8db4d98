/**
 * Evaluations (`/v1/evaluation`; the SDKs' `evals`, the CLI's `together evals`): what the API, the
 * workflow `evaluation/<id>` and its activities share. The workflow id is written here once, and
 * reading a judge's verdict is pure, so the activity and its tests use the same rules.
 *
 * A judge is told the form of its verdict (verdictInstruction) and its answer is read strictly
 * (readVerdict): an answer that does not give one of the labels, a score in range, or A / B / Tie
 * is counted as invalid, never guessed.
 */

export const EVALUATION_TYPES = ['classify', 'score', 'compare'] as const;
export type EvaluationType = (typeof EVALUATION_TYPES)[number];

/** The statuses the SDKs type; `error` is the platform's failure, `user_error` the request's (a bad file or template). */
export const EVALUATION_STATUSES = ['pending', 'queued', 'running', 'completed', 'error', 'user_error'] as const;
export type EvaluationStatus = (typeof EVALUATION_STATUSES)[number];

export const MODEL_SOURCES = ['serverless', 'dedicated', 'external'] as const;
export type ModelSource = (typeof MODEL_SOURCES)[number];

export const EVALUATION_RESOURCE_TYPE = 'evaluation';
export const evaluationWorkflowId = (evaluationId: string) => `evaluation/${evaluationId}`;

/** The most rows an evaluation's file may have. */
export const EVALUATION_MAX_ROWS = 100_000;

/** A model that generates: its templates fill from the row's columns. */
export interface ModelRequest {
  model: string;
  model_source: ModelSource;
  system_template: string;
  input_template: string;
  max_tokens: number;
  temperature: number;
  external_base_url?: string;
  /** Never stored as given: sealed at create (EvaluationWorkflowInput.sealedTokens). */
  external_api_token?: string;
}

export interface Judge {
  model: string;
  model_source: ModelSource;
  system_template: string;
  max_tokens?: number;
  temperature?: number;
  external_base_url?: string;
  external_api_token?: string;
  /** Rows judged at once. */
  num_workers?: number;
}

/** What is judged for a row: a column's pre-generated text, or a model's generation. */
export type Candidate = string | ModelRequest;

/** The parameters of an evaluation as the pinned SDKs send them (tokens removed before they are stored). */
export interface EvaluationParameters {
  input_data_file_path: string;
  judge: Judge;
  labels?: string[];
  pass_labels?: string[];
  min_score?: number;
  max_score?: number;
  pass_threshold?: number;
  model_to_evaluate?: Candidate;
  model_a?: Candidate;
  model_b?: Candidate;
  disable_position_bias_correction?: boolean;
}

export interface EvaluationWorkflowInput {
  evaluationId: string;
  projectId: string;
  /** The key that created it: its serverless and dedicated calls are made as it. */
  apiKeyId: string;
  /** Rows one activity judges. */
  sliceRows: number;
}

/** Where a generation for the judge comes from, by its role in the evaluation. */
export type CandidateRole = 'model_to_evaluate' | 'model_a' | 'model_b';
export const candidateRoles = (type: EvaluationType): CandidateRole[] =>
  type === 'compare' ? ['model_a', 'model_b'] : ['model_to_evaluate'];

/** A verdict read from a judge's answer. */
export type Verdict =
  { kind: 'label'; label: string } | { kind: 'score'; score: number } | { kind: 'winner'; winner: 'A' | 'B' | 'Tie' };

/** What the judge is told about the form of its answer, after the user's own system prompt. */
export function verdictInstruction(
  type: EvaluationType,
  p: Pick<EvaluationParameters, 'labels' | 'min_score' | 'max_score'>,
) {
  switch (type) {
    case 'classify':
      return `Answer with JSON only: {"label": "<one of ${JSON.stringify(p.labels)}>"}`;
    case 'score':
      return `Answer with JSON only: {"score": <a number from ${p.min_score} to ${p.max_score}>}`;
    case 'compare':
      return 'Answer with JSON only: {"winner": "A"} if response A is better, {"winner": "B"} if response B is, {"winner": "Tie"} if neither.';
  }
}

/** The first JSON object in `text` (code fences allowed around it), or undefined. */
function firstJsonObject(text: string): Record<string, unknown> | undefined {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  for (let end = text.indexOf('}', start); end >= 0; end = text.indexOf('}', end + 1)) {
    try {
      const value: unknown = JSON.parse(text.slice(start, end + 1));
      if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // not closed yet: try the next brace
    }
  }
  return undefined;
}

/**
 * The verdict in a judge's answer: the JSON it was asked for (`{"label"|"score"|"winner": …}`), or
 * an answer that is nothing but the label, the number or A / B / Tie. Anything else (no verdict, a
 * label not offered, a score out of range) is null: counted invalid, never guessed.
 */
export function readVerdict(
  type: EvaluationType,
  answer: string,
  p: Pick<EvaluationParameters, 'labels' | 'min_score' | 'max_score'>,
): Verdict | null {
  const json = firstJsonObject(answer);
  const bare = answer
    .trim()
    .replace(/^["'`]+|["'`.]+$/g, '')
    .trim();
  if (type === 'classify') {
    const given = json ? json.label : bare;
    if (typeof given !== 'string') return null;
    const label = p.labels?.find((l) => l.toLowerCase() === given.trim().toLowerCase());
    return label === undefined ? null : { kind: 'label', label };
  }
  if (type === 'score') {
    const given = json ? json.score : bare;
    const score =
      typeof given === 'number'
        ? given
        : typeof given === 'string' && /^-?\d+(\.\d+)?$/.test(given)
          ? Number(given)
          : NaN;
    if (!Number.isFinite(score) || score < p.min_score! || score > p.max_score!) return null;
    return { kind: 'score', score };
  }
  const given = json ? json.winner : bare;
  if (typeof given !== 'string') return null;
  const winner = ({ a: 'A', b: 'B', tie: 'Tie' } as const)[given.trim().toLowerCase() as 'a' | 'b' | 'tie'];
  return winner ? { kind: 'winner', winner } : null;
}

/**
 * A compare row's outcome from its two judge passes (the second with the responses' order
 * flipped, so its A is model B): both agree on a model, it wins; they disagree, or either says
 * Tie, it is a tie. One pass (disable_position_bias_correction): its verdict.
 */
export function reconcileComparison(first: 'A' | 'B' | 'Tie', flipped?: 'A' | 'B' | 'Tie'): 'A' | 'B' | 'Tie' {
  if (flipped === undefined) return first;
  const unflipped = flipped === 'A' ? 'B' : flipped === 'B' ? 'A' : 'Tie';
  return first === unflipped ? first : 'Tie';
}
