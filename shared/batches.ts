/**
 * Batches (`/v1/batches`): what the API, the workflow `batch/<id>` and its activities share. The
 * workflow id and its messages are written here once; the checks of an input line are pure, so
 * the validation activity and its tests use the same ones.
 */

export const BATCH_STATUSES = ['VALIDATING', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/audio/transcriptions', '/v1/audio/translations'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** The statuses a batch ends in. */
export const BATCH_ENDED: readonly BatchStatus[] = ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'];

export const BATCH_RESOURCE_TYPE = 'batch';
export const batchWorkflowId = (batchId: string) => `batch/${batchId}`;
export const BATCH_MESSAGES = { cancel: 'cancel' } as const;

/** The completion window when a request names none (as the hosted service's batches). */
export const DEFAULT_COMPLETION_WINDOW = '24h';

/** `24h`, `90m`, `3600s`, `2d`: the window's length in seconds; null when it is none of those. */
export function completionWindowSeconds(window: string): number | null {
  const m = /^(\d{1,6})([smhd])$/.exec(window.trim());
  if (!m) return null;
  const seconds = Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
  return seconds > 0 && seconds <= 30 * 86400 ? seconds : null;
}

/** The most lines a batch may have. */
export const BATCH_MAX_LINES = 1_000_000;

/** Where a slice of the input starts: its first line (0-based) and its byte range in the file. */
export interface BatchSlice {
  firstLine: number;
  lines: number;
  start: number;
  /** Inclusive. */
  end: number;
}

export interface BatchWorkflowInput {
  batchId: string;
  projectId: string;
  /** The key that created the batch: its calls are made as it; revoking it stops the batch. */
  apiKeyId: string;
  endpoint: BatchEndpoint;
  inputFileId: string;
  modelId?: string;
  /** When the batch expires (ISO): the lines not answered by then are not run. */
  deadline: string;
  /** How long its files are kept once it ended (GANTRY_BATCH_RETENTION_DAYS when it was created). */
  retentionSeconds: number;
  /** Lines one activity runs (GANTRY_BATCH_SLICE_LINES when it was created). */
  sliceLines: number;
  /** Slices one run goes through before it continues as new (GANTRY_BATCH_SLICES_PER_RUN): the history stays small. */
  slicesPerRun: number;
  /** Carried by continue-as-new: the validated slices and the first one still to run. */
  carried?: { slices: BatchSlice[]; next: number; totalLines: number };
}

/** An audio line's `file` that names one of the project's files (its bytes are sent, as an upload). */
export const AUDIO_FILE_ID = /^file-[0-9a-f-]{36}$/;

/** One line of an input file, as the official clients write it. */
export interface BatchLine {
  custom_id: string;
  body: Record<string, unknown>;
}

/**
 * Checks one line of the input (`n` 1-based, as the report names it): a JSON object with a
 * non-empty string `custom_id` not seen before and an object `body` the endpoint takes. Returns
 * the line, or the reason it is refused.
 */
export function checkBatchLine(
  text: string,
  endpoint: BatchEndpoint,
  seen: Set<string>,
  modelId: string | undefined,
): BatchLine | { reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { reason: 'not valid JSON' };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { reason: 'not a JSON object' };
  const { custom_id, body } = value as Record<string, unknown>;
  if (typeof custom_id !== 'string' || !custom_id) return { reason: 'custom_id is required (a non-empty string)' };
  if (custom_id.length > 512) return { reason: 'custom_id is longer than 512 characters' };
  if (seen.has(custom_id)) return { reason: `custom_id '${custom_id}' is used by an earlier line` };
  if (!body || typeof body !== 'object' || Array.isArray(body)) return { reason: 'body is required (an object)' };
  const b = body as Record<string, unknown>;
  if (b.model === undefined && !modelId) return { reason: 'body.model is required (or model_id on the batch)' };
  if (b.model !== undefined && (typeof b.model !== 'string' || !b.model))
    return { reason: 'body.model must be a non-empty string' };
  if (b.stream === true) return { reason: 'body.stream is not available in a batch' };
  if (endpoint === '/v1/chat/completions') {
    if (!Array.isArray(b.messages) || !b.messages.length)
      return { reason: 'body.messages is required (a non-empty array)' };
  } else if (typeof b.file !== 'string' || !(/^https?:\/\//i.test(b.file) || AUDIO_FILE_ID.test(b.file))) {
    return { reason: "body.file is required: the audio's http(s) URL, or the id of a file of this project" };
  }
  seen.add(custom_id);
  return { custom_id, body: b };
}
