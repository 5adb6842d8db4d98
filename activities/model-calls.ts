/**
 * Model calls made for a batch or an evaluation, from the control worker's activities. Each goes
 * through the same path as a user's own call: chat completions to the inference gateway, speech to
 * the API, over HTTP, authenticated with a work credential of the API key that created the work
 * (platform/work-credentials.ts). So the same routing, limits and billing apply; the gateway
 * keeps the project's work calls to its concurrency, puts interactive calls first, and bills their
 * tokens as the work's usage. The key's secret is never stored: the credential is minted here for
 * each call, and it stops working when the key is revoked.
 *
 * What a call answers is one of:
 * - an answer (any 2xx, and any 4xx but those below): final, recorded by the caller, never retried;
 * - ModelCallTransient (a network failure, 408, 425, 429, 5xx): the caller retries later;
 *   a call with a `key` is retried with the same key, so the gateway answers it once;
 * - ModelCallKeyRevoked (401, 403 `work_credential_scope` aside): the key no longer works, so the
 *   work cannot go on.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Keyring } from '../platform/keyring';
import { mintWorkCredential } from '../platform/work-credentials';
import type { WorkTag } from '../shared/work-tag';
import { isTransientStatus, WORK_CALL_HEADER } from '../shared/work-calls';

/** The paths a batch line or an evaluation may call. */
export const MODEL_CALL_PATHS = ['/v1/chat/completions', '/v1/audio/transcriptions', '/v1/audio/translations'] as const;
export type ModelCallPath = (typeof MODEL_CALL_PATHS)[number];

export interface ModelCallDeps {
  /** The API (speech). */
  apiUrl: string;
  /** The inference gateway (chat completions). */
  gatewayUrl: string;
  /** Signs the work credentials; without one (no GANTRY_SIGNING_SECRET) no work can call a model. */
  keyring?: Keyring;
  /** How long one call may take before it counts as a transient failure. */
  timeoutMs?: number;
}

export interface ModelCall {
  /** The API key that created the work: calls are made as it. */
  apiKeyId: string;
  work: WorkTag;
  path: ModelCallPath;
  /** The request body, as a user would send it (JSON for chat; the speech fields, `file` a URL or the audio's bytes). */
  body: Record<string, unknown>;
  /**
   * The call's name within its work (`line-12`): the gateway makes a named call once and keeps its
   * answer, so asking again after a lost worker gets that answer (shared/work-calls.ts).
   */
  key?: string;
  signal?: AbortSignal;
}

/** A final answer: recorded once, never asked again. */
export interface ModelAnswer {
  status: number;
  /** The answer's JSON body (the error body for a 4xx), or its text when it is not JSON. */
  body: unknown;
}

/** The call may succeed later (the gateway or a replica was busy, down or slow). */
export class ModelCallTransient extends Error {
  constructor(
    message: string,
    /** Seconds the server asked to wait (Retry-After), when it said. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ModelCallTransient';
  }
}

/** The type of the non-retryable failure when the work's API key stopped working. */
export const KEY_REVOKED = 'ApiKeyRevoked';

const CREDENTIAL_TTL_SECONDS = 300;
const DEFAULT_TIMEOUT_MS = 10 * 60_000;

/**
 * Makes one model call. Answers its final answer; throws ModelCallTransient to be retried, or a
 * non-retryable ApplicationFailure of type KEY_REVOKED when the key no longer works.
 */
export async function callModel(deps: ModelCallDeps, call: ModelCall): Promise<ModelAnswer> {
  if (!deps.keyring)
    throw ApplicationFailure.nonRetryable(
      'Model calls of batches and evaluations need GANTRY_SIGNING_SECRET (the worker signs their credentials).',
      'NoSigningSecret',
    );
  const credential = mintWorkCredential(deps.keyring, call.apiKeyId, call.work, CREDENTIAL_TTL_SECONDS);
  const chat = call.path === '/v1/chat/completions';
  const url = `${chat ? deps.gatewayUrl : deps.apiUrl}${call.path}`;
  const signals = [AbortSignal.timeout(deps.timeoutMs ?? DEFAULT_TIMEOUT_MS), ...(call.signal ? [call.signal] : [])];
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${credential}`,
        ...(chat ? { 'content-type': 'application/json' } : {}),
        ...(call.key ? { [WORK_CALL_HEADER]: call.key } : {}),
      },
      body: chat ? JSON.stringify({ ...call.body, stream: false }) : speechForm(call.body),
      signal: AbortSignal.any(signals),
    });
  } catch (err) {
    if (call.signal?.aborted) throw err;
    throw new ModelCallTransient(`${call.path} could not be reached: ${(err as Error).message}`);
  }
  const text = await res.text().catch((err: Error) => {
    throw new ModelCallTransient(`${call.path} answered ${res.status} but its body was cut: ${err.message}`);
  });
  const body = parsed(text);
  if (isTransientStatus(res.status)) {
    const after = Number(res.headers.get('retry-after'));
    throw new ModelCallTransient(
      `${call.path} answered ${res.status}: ${errorMessage(body) ?? text.slice(0, 200)}`,
      Number.isFinite(after) && after > 0 ? after : undefined,
    );
  }
  if (res.status === 401)
    throw ApplicationFailure.nonRetryable(
      `The API key that created this ${call.work.kind} no longer works (revoked, or its project or membership ended).`,
      KEY_REVOKED,
    );
  return { status: res.status, body };
}

/** The speech routes take multipart, as the SDKs send them; arrays as repeated `key[]` fields. */
function speechForm(body: Record<string, unknown>): FormData {
  const form = new FormData();
  for (const [key, value] of Object.entries(body)) {
    if (value === undefined || value === null) continue;
    if (value instanceof Blob) form.append(key, value, 'audio');
    else if (Array.isArray(value)) for (const v of value) form.append(`${key}[]`, String(v));
    else form.append(key, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  return form;
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function errorMessage(body: unknown): string | undefined {
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof message === 'string' ? message : undefined;
}
