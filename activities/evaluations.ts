/**
 * The activities of an evaluation (`evaluation/<id>`, workflows/evaluations.ts), on the control queue:
 *
 * - checkEvaluationInput reads the file once: every line a JSON object (a row), every column that
 *   model_to_evaluate / model_a / model_b names present in some row; otherwise the evaluation ends
 *   `user_error`, naming the line or the column, before any call;
 * - judgeEvaluationRows generates (when a model is evaluated) and judges each row of a range that
 *   has no recorded outcome yet, and records each outcome in PostgreSQL as it comes, so a retry
 *   (a lost worker, a transient failure) judges only rows with no outcome. Serverless and dedicated
 *   models are called through the gateway as the key that created the evaluation (model-calls.ts:
 *   its limits, and its billing as evaluation usage); an external model at its public URL with
 *   its sealed token;
 * - finishEvaluation counts the results from the recorded outcomes and writes the result file (the
 *   project's file, purpose eval): each row with its generations, the judge's answers and verdict.
 */
import { Context, heartbeat } from '@temporalio/activity';
import { CsvError, parse } from 'csv-parse';
import { ApplicationFailure } from '@temporalio/common';
import {
  getEvaluationById,
  outcomesAfter,
  projectEvaluation,
  recordEvaluationRow,
  recordedRows,
  type EvaluationRow,
} from '../db/evaluations';
import { getFileById } from '../db/files';
import type { Db } from '../db/pool';
import type { Keyring } from '../platform/keyring';
import type { RemoteFetchPolicy } from '../platform/config';
import { remoteFetch, RemoteFetchRefused } from '../providers/remote/fetch-remote';
import type { BlobStore } from '../providers/storage/blob-store';
import {
  candidateRoles,
  EVALUATION_MAX_ROWS,
  readVerdict,
  reconcileComparison,
  verdictInstruction,
  type CandidateRole,
  type EvaluationParameters,
  type EvaluationType,
  type Judge,
  type ModelRequest,
} from '../shared/evaluations';
import { renderRowTemplate } from '../shared/row-templates';
import { linesOf } from './lines-of';
import { forgetWorkCallAnswers } from '../db/work-call-answers';
import { callModel, ModelCallTransient, type ModelCallDeps } from './model-calls';
import { resultFileId, storeWrittenFile } from './written-files';

export interface EvaluationActivityDeps {
  db: Db;
  blobs: BlobStore;
  keyring?: Keyring;
  modelCalls?: Omit<ModelCallDeps, 'keyring'>;
  /** What an external model's URL may reach (GANTRY_REMOTE_FETCH_ALLOW_PRIVATE). */
  remoteFetch: RemoteFetchPolicy;
}

/** Rows judged at once when the request sets no num_workers (the gateway holds the project's calls too). */
const DEFAULT_WORKERS = 4;
/** Tries of one call within one run of a range before the range is handed back to be retried later. */
const CALL_TRIES = 4;
/** What a judge may write when the request says nothing (the SDKs' default of 32768 is for hosted reasoning judges). */
const DEFAULT_JUDGE_MAX_TOKENS = 512;
const DEFAULT_JUDGE_TEMPERATURE = 0.05;
const DEFAULT_TEMPERATURE = 0.7;

/** What one row came to: recorded once, counted by finishEvaluation, written to the result file. */
export interface RowOutcome {
  row: Record<string, unknown>;
  generations: Partial<Record<CandidateRole, string>>;
  generation_errors: Partial<Record<CandidateRole, string>>;
  /** The judge's answers: one, or two for a compare with position-bias correction (the second flipped). */
  judgments: string[];
  judge_error?: string;
  /** The verdict read from the answers; null when the judge gave none it was asked for (invalid). */
  verdict: string | number | null;
}

export type EvaluationCheck = { ok: true; totalRows: number } | { ok: false; error: string };

/** A failed call that will not succeed by asking again: the row records it. */
class CallRefused extends Error {}

export function createEvaluationActivities(deps: EvaluationActivityDeps) {
  const { db, blobs } = deps;

  async function requireEvaluation(id: string): Promise<EvaluationRow> {
    const e = await getEvaluationById(db, id);
    if (!e) throw ApplicationFailure.nonRetryable(`Evaluation ${id} is gone.`, 'EvaluationGone');
    return e;
  }

  /** The file's rows: JSONL objects, or CSV records keyed by the header (the two forms an eval file takes). */
  async function* rowsOf(e: EvaluationRow): AsyncGenerator<{ index: number; row: Record<string, unknown> }> {
    const p = e.parameters as unknown as EvaluationParameters;
    const file = await getFileById(db, p.input_data_file_path);
    if (!file || file.project_id !== e.project_id || !file.uploaded_at)
      throw new CallRefused('The input file is gone.');
    let index = 0;
    if (file.file_type === 'csv') {
      const records = blobs.read(file.blob_key).pipe(parse({ bom: true, columns: true, relax_column_count: true }));
      try {
        for await (const row of records as AsyncIterable<Record<string, string>>) yield { index: index++, row };
      } catch (err) {
        if (err instanceof CsvError) throw new CallRefused(`The CSV cannot be parsed: ${err.message}`);
        throw err;
      }
      return;
    }
    for await (const line of linesOf(blobs.read(file.blob_key))) {
      let value: unknown;
      try {
        value = JSON.parse(line.text);
      } catch {
        throw new CallRefused(`Line ${line.number}: not valid JSON.`);
      }
      if (!value || typeof value !== 'object' || Array.isArray(value))
        throw new CallRefused(`Line ${line.number}: not a JSON object (a row of columns).`);
      yield { index: index++, row: value as Record<string, unknown> };
    }
  }

  /** Sends a chat to `m`: through the gateway as the evaluation's key, or to its external API. */
  async function chat(
    e: EvaluationRow,
    role: string,
    m: { model: string; model_source: string; external_base_url?: string },
    body: { messages: { role: string; content: string }[]; max_tokens: number; temperature: number },
    signal: AbortSignal,
    /** The call's name within the evaluation: the gateway makes it once (shared/work-calls.ts). */
    key: string,
  ): Promise<string> {
    let status: number;
    let answer: unknown;
    if (m.model_source === 'external') {
      const sealed = e.sealed_tokens[role];
      if (!deps.keyring || !sealed) throw new CallRefused('The external API token is not readable.');
      const token = deps.keyring.unseal(Buffer.from(sealed, 'base64'), `evaluation/${e.id}/${role}`);
      const url = new URL('chat/completions', m.external_base_url!.replace(/\/*$/, '/'));
      let res: Response;
      try {
        res = await remoteFetch(url, deps.remoteFetch, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: m.model, ...body }),
          signal: AbortSignal.any([signal, AbortSignal.timeout(10 * 60_000)]),
        });
      } catch (err) {
        if (err instanceof RemoteFetchRefused) throw new CallRefused(err.message);
        if (signal.aborted) throw err;
        throw new ModelCallTransient(`${url.host} could not be reached: ${(err as Error).message}`);
      }
      status = res.status;
      const text = await res.text();
      if (status >= 500 || status === 429 || status === 408)
        throw new ModelCallTransient(`${url.host} answered ${status}`);
      try {
        answer = JSON.parse(text);
      } catch {
        answer = text;
      }
    } else {
      if (!deps.modelCalls) throw ApplicationFailure.nonRetryable('This worker makes no model calls.', 'NoModelCalls');
      const a = await callModel(
        { ...deps.modelCalls, keyring: deps.keyring },
        {
          apiKeyId: e.api_key_id,
          work: { kind: 'evaluation', id: e.id },
          path: '/v1/chat/completions',
          body: { model: m.model, ...body },
          key,
          signal,
        },
      );
      status = a.status;
      answer = a.body;
    }
    const content = (answer as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message?.content;
    if (status >= 400 || typeof content !== 'string') {
      const message = (answer as { error?: { message?: string } })?.error?.message;
      throw new CallRefused(`${m.model} answered ${status}${message ? `: ${message}` : ' without a message'}`);
    }
    return content;
  }

  /** `chat`, tried again on transient failures (a busy or restarting model) a few times within this run. */
  async function chatWithRetries(...args: Parameters<typeof chat>): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await chat(...args);
      } catch (err) {
        if (!(err instanceof ModelCallTransient) || attempt >= CALL_TRIES || args[4].aborted) throw err;
        await new Promise((r) => setTimeout(r, Math.min(30, err.retryAfterSeconds ?? 2 ** attempt) * 1000));
      }
    }
  }

  /** Generates or reads each candidate of a row, then asks the judge: the row's outcome. */
  async function judgeRow(
    e: EvaluationRow,
    { index, row }: { index: number; row: Record<string, unknown> },
    signal: AbortSignal,
  ): Promise<RowOutcome> {
    const type = e.type;
    const p = e.parameters as unknown as EvaluationParameters;
    const outcome: RowOutcome = { row, generations: {}, generation_errors: {}, judgments: [], verdict: null };
    for (const role of candidateRoles(type)) {
      const c = p[role];
      if (c === undefined) continue;
      if (typeof c === 'string') {
        const v = row[c];
        if (v === undefined || v === null) outcome.generation_errors[role] = `The row has no column '${c}'.`;
        else outcome.generations[role] = typeof v === 'string' ? v : JSON.stringify(v);
        continue;
      }
      try {
        outcome.generations[role] = await chatWithRetries(
          e,
          role,
          c,
          generationBody(c, row),
          signal,
          `row-${index}/${role}`,
        );
      } catch (err) {
        if (!(err instanceof CallRefused)) throw err;
        outcome.generation_errors[role] = err.message;
      }
    }
    if (Object.keys(outcome.generation_errors).length) return outcome;

    const passes =
      type === 'compare' && !p.disable_position_bias_correction
        ? [judgePrompt(type, outcome, false), judgePrompt(type, outcome, true)]
        : [judgePrompt(type, outcome, false)];
    try {
      for (const [pass, user] of passes.entries())
        outcome.judgments.push(
          await chatWithRetries(
            e,
            'judge',
            p.judge,
            judgeBody(type, p, row, user),
            signal,
            `row-${index}/judge/${pass}`,
          ),
        );
    } catch (err) {
      if (!(err instanceof CallRefused)) throw err;
      outcome.judge_error = err.message;
      return outcome;
    }
    const verdicts = outcome.judgments.map((answer) => readVerdict(type, answer, p));
    if (verdicts.some((v) => v === null)) return outcome; // invalid: counted, never guessed
    if (type === 'classify') outcome.verdict = (verdicts[0] as { label: string }).label;
    else if (type === 'score') outcome.verdict = (verdicts[0] as { score: number }).score;
    else {
      const [first, flipped] = verdicts as { winner: 'A' | 'B' | 'Tie' }[];
      outcome.verdict = reconcileComparison(first.winner, flipped?.winner);
    }
    return outcome;
  }

  return {
    async checkEvaluationInput(input: { evaluationId: string }): Promise<EvaluationCheck> {
      const e = await requireEvaluation(input.evaluationId);
      const p = e.parameters as unknown as EvaluationParameters;
      const columns = candidateRoles(e.type)
        .map((role) => [role, p[role]] as const)
        .filter((c): c is [CandidateRole, string] => typeof c[1] === 'string');
      const seen = new Set<string>();
      let total = 0;
      let error: string | undefined;
      try {
        for await (const { row } of rowsOf(e)) {
          for (const [, column] of columns) if (column in row) seen.add(column);
          if (++total > EVALUATION_MAX_ROWS)
            throw new CallRefused(`An evaluation has at most ${EVALUATION_MAX_ROWS} rows.`);
          if (total % 10_000 === 0) heartbeat({ total });
        }
        if (!total) throw new CallRefused('The file has no rows.');
        const missing = columns.find(([, column]) => !seen.has(column));
        if (missing) throw new CallRefused(`${missing[0]} names the column '${missing[1]}', which no row has.`);
      } catch (err) {
        if (!(err instanceof CallRefused)) throw err;
        error = err.message;
      }
      if (error) {
        await projectEvaluation(db, e.id, { status: 'user_error', message: error, results: { error } });
        return { ok: false, error };
      }
      await projectEvaluation(db, e.id, { status: 'running', message: `${total} rows to judge.`, totalRows: total });
      return { ok: true, totalRows: total };
    },

    async judgeEvaluationRows(input: { evaluationId: string; first: number; last: number }): Promise<void> {
      const e = await requireEvaluation(input.evaluationId);
      const p = e.parameters as unknown as EvaluationParameters;
      const done = await recordedRows(db, e.id, input.first, input.last);
      const todo: { index: number; row: Record<string, unknown> }[] = [];
      for await (const r of rowsOf(e)) {
        if (r.index >= input.last) break;
        if (r.index >= input.first && !done.has(r.index)) todo.push(r);
      }
      const { cancellationSignal: signal } = Context.current();
      let judged = 0;
      let next = 0;
      const lane = async () => {
        while (next < todo.length && !signal.aborted) {
          const r = todo[next++];
          await recordEvaluationRow(db, e.id, r.index, await judgeRow(e, r, signal));
          heartbeat({ judged: ++judged });
        }
      };
      // Alive while calls are slow: a lost worker is noticed by its missing heartbeats, not by a slow answer.
      const beat = setInterval(() => heartbeat({ judged }), 2000);
      try {
        const workers = Math.min(p.judge.num_workers ?? DEFAULT_WORKERS, todo.length);
        await Promise.all(Array.from({ length: workers }, lane));
      } finally {
        clearInterval(beat);
      }
    },

    /** Counts the results and writes the result file from the recorded outcomes. Idempotent. */
    async finishEvaluation(input: { evaluationId: string }): Promise<void> {
      const e = await requireEvaluation(input.evaluationId);
      const p = e.parameters as unknown as EvaluationParameters;
      const tally = new Tally(e.type, p);
      const outcomes = async function* () {
        for (let after = -1; ;) {
          const page = await outcomesAfter<RowOutcome>(db, e.id, after, 500);
          if (!page.length) return;
          for (const { outcome } of page) yield outcome;
          after = page[page.length - 1].row;
        }
      };
      for await (const o of outcomes()) tally.add(o);
      const fileId = resultFileId(e.id, 'results');
      await storeWrittenFile(
        db,
        blobs,
        {
          projectId: e.project_id,
          fileId,
          filename: `${e.id}_results.jsonl`,
          purpose: 'eval',
          writer: 'its evaluation',
        },
        (async function* () {
          for await (const o of outcomes()) yield `${JSON.stringify(resultLine(o))}\n`;
        })(),
      );
      await projectEvaluation(db, e.id, {
        status: 'completed',
        message: 'Results counted; the result file is written.',
        results: { ...tally.results(), result_file_id: fileId },
      });
      await forgetWorkCallAnswers(db, { kind: 'evaluation', id: e.id });
    },

    async failEvaluation(input: { evaluationId: string; error: string }): Promise<void> {
      await projectEvaluation(db, input.evaluationId, {
        status: 'error',
        message: input.error,
        results: { error: input.error },
      });
      await forgetWorkCallAnswers(db, { kind: 'evaluation', id: input.evaluationId });
    },
  };
}

export type EvaluationActivities = ReturnType<typeof createEvaluationActivities>;

function generationBody(m: ModelRequest, row: Record<string, unknown>) {
  const system = renderRowTemplate(m.system_template ?? '', row);
  return {
    messages: [
      ...(system ? [{ role: 'system', content: system }] : []),
      { role: 'user', content: renderRowTemplate(m.input_template, row) },
    ],
    max_tokens: m.max_tokens,
    temperature: m.temperature ?? DEFAULT_TEMPERATURE,
  };
}

/** What the judge reads after its instructions: the response(s) to judge (in flipped order for a compare's second pass). */
function judgePrompt(type: EvaluationType, o: RowOutcome, flipped: boolean): string {
  if (type !== 'compare') {
    const response = o.generations.model_to_evaluate;
    return response === undefined ? 'Judge the input above.' : `Response to judge:\n${response}`;
  }
  const [a, b] = flipped
    ? [o.generations.model_b, o.generations.model_a]
    : [o.generations.model_a, o.generations.model_b];
  return `Response A:\n${a}\n\nResponse B:\n${b}`;
}

function judgeBody(type: EvaluationType, p: EvaluationParameters, row: Record<string, unknown>, user: string) {
  const j: Judge = p.judge;
  return {
    messages: [
      { role: 'system', content: `${renderRowTemplate(j.system_template, row)}\n\n${verdictInstruction(type, p)}` },
      { role: 'user', content: user },
    ],
    max_tokens: j.max_tokens ?? DEFAULT_JUDGE_MAX_TOKENS,
    temperature: j.temperature ?? DEFAULT_JUDGE_TEMPERATURE,
  };
}

/** A row of the result file: its columns, each generation, the judge's answers and the verdict read from them. */
function resultLine(o: RowOutcome) {
  return {
    ...o.row,
    ...Object.fromEntries(Object.entries(o.generations).map(([role, text]) => [`${role}_generation`, text])),
    ...(Object.keys(o.generation_errors).length ? { generation_errors: o.generation_errors } : {}),
    judge_feedback: o.judgments[0] ?? null,
    ...(o.judgments.length > 1 ? { judge_feedback_flipped: o.judgments[1] } : {}),
    ...(o.judge_error ? { judge_error: o.judge_error } : {}),
    verdict: o.verdict,
  };
}

/** The counts the SDKs type, from the recorded outcomes. */
class Tally {
  private generationFails = 0;
  private judgeFails = 0;
  private invalid = 0;
  private readonly labels = new Map<string, number>();
  private readonly scores: number[] = [];
  private readonly wins = { A: 0, B: 0, Tie: 0 };

  constructor(
    private readonly type: EvaluationType,
    private readonly p: EvaluationParameters,
  ) {
    for (const l of p.labels ?? []) this.labels.set(l, 0);
  }

  add(o: RowOutcome): void {
    if (Object.keys(o.generation_errors).length) this.generationFails++;
    else if (o.judge_error) this.judgeFails++;
    else if (o.verdict === null) this.invalid++;
    else if (this.type === 'classify')
      this.labels.set(o.verdict as string, (this.labels.get(o.verdict as string) ?? 0) + 1);
    else if (this.type === 'score') this.scores.push(o.verdict as number);
    else this.wins[o.verdict as 'A' | 'B' | 'Tie']++;
  }

  results(): Record<string, unknown> {
    const percent = (part: number, whole: number) => (whole ? Math.round((part / whole) * 10_000) / 100 : 0);
    if (this.type === 'classify') {
      const valid = [...this.labels.values()].reduce((a, b) => a + b, 0);
      const passing = (this.p.pass_labels ?? []).reduce((n, l) => n + (this.labels.get(l) ?? 0), 0);
      return {
        label_counts: JSON.stringify(Object.fromEntries(this.labels)),
        pass_percentage: percent(passing, valid),
        invalid_label_count: this.invalid,
        generation_fail_count: this.generationFails,
        judge_fail_count: this.judgeFails,
      };
    }
    if (this.type === 'score') {
      const n = this.scores.length;
      const mean = n ? this.scores.reduce((a, b) => a + b, 0) / n : undefined;
      const std = n ? Math.sqrt(this.scores.reduce((a, s) => a + (s - mean!) ** 2, 0) / n) : undefined;
      return {
        aggregated_scores: {
          ...(mean !== undefined ? { mean_score: mean, std_score: std } : {}),
          pass_percentage: percent(this.scores.filter((s) => s >= this.p.pass_threshold!).length, n),
        },
        invalid_score_count: this.invalid,
        failed_samples: this.generationFails + this.judgeFails + this.invalid,
        generation_fail_count: this.generationFails,
        judge_fail_count: this.judgeFails,
      };
    }
    return {
      A_wins: this.wins.A,
      B_wins: this.wins.B,
      Ties: this.wins.Tie,
      generation_fail_count: this.generationFails,
      // A compare has no field for an answer without a verdict: it is a failed judgment.
      judge_fail_count: this.judgeFails + this.invalid,
    };
  }
}
