/**
 * The command-line tool's HTTP client: `Authorization: Bearer $SERVICE_API_KEY`
 * on every call, the API's error body (`{error: {message, type, param, code}}`)
 * turned into a CliError with the exit code its status maps to, network
 * failures named with the URL that could not be reached, and GETs retried
 * when the API says to (429 or 503 with a short Retry-After).
 */
import { CliError, EXIT, exitCodeForStatus, usageError } from './errors';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080/v1';

/** Where the API is: `root` is the host (and any path prefix) under which `/v1` and `/v2` live. */
export interface ApiTarget {
  root: string;
  v1: string;
  v2: string;
}

/** `http://host:8080/v1` (or a bare `http://host:8080`) gives both the v1 and v2 URLs. */
export function apiTarget(baseUrl: string): ApiTarget {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw usageError(`--base-url '${baseUrl}' is not a URL (expected e.g. ${DEFAULT_BASE_URL}).`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`--base-url '${baseUrl}' must be an http(s) URL.`);
  }
  const trimmed = `${url.origin}${url.pathname}`.replace(/\/+$/, '');
  const root = trimmed.replace(/\/v[12]$/, '');
  return { root, v1: `${root}/v1`, v2: `${root}/v2` };
}

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  query?: Query;
  json?: unknown;
  body?: RequestInit['body'];
  headers?: Record<string, string>;
  /** false: send no API key (pre-signed URLs carry their own credential). */
  auth?: boolean;
  /** Statuses besides 2xx that are an answer, not an error (e.g. 302 of the upload flow). */
  accept?: number[];
  /** Set for streamed request bodies. */
  duplex?: 'half';
}

interface ErrorBody {
  error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown };
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/** A CliError from a failed response: the API's own message, its status, type, code and param. */
export async function errorFromResponse(res: Response): Promise<CliError> {
  const text = await res.text().catch(() => '');
  let body: ErrorBody | undefined;
  try {
    body = JSON.parse(text) as ErrorBody;
  } catch {
    body = undefined;
  }
  const e = body?.error;
  const message =
    str(e?.message) ??
    `HTTP ${res.status} ${res.statusText}${text.trim() ? `: ${text.trim().replace(/\s+/g, ' ').slice(0, 200)}` : ''}`;
  return new CliError(message, exitCodeForStatus(res.status), {
    status: res.status,
    type: str(e?.type),
    code: str(e?.code),
    param: str(e?.param),
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class ApiClient {
  constructor(
    readonly target: ApiTarget,
    private readonly apiKey: string | undefined,
  ) {}

  /** `path` is absolute (`https://…`, a pre-signed URL) or starts with `/v1` or `/v2`. */
  url(path: string, query?: Query): string {
    const url = new URL(/^https?:\/\//.test(path) ? path : `${this.target.root}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    return url.toString();
  }

  /** The response of a successful (or accepted) request; any other status throws the API's error. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    if (opts.auth !== false) {
      if (!this.apiKey) {
        throw usageError('SERVICE_API_KEY is not set: export your API key as SERVICE_API_KEY.');
      }
      headers.authorization = `Bearer ${this.apiKey}`;
    }
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] = 'application/json';
    }
    const url = this.url(path, opts.query);
    // Reads are sent again when the API asks to wait; writes never are (they may have happened).
    const retriable = method === 'GET';
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await fetch(url, {
          method,
          headers,
          body,
          redirect: 'manual',
          ...(opts.duplex ? { duplex: opts.duplex } : {}),
        } as RequestInit);
      } catch (err) {
        throw networkError(url, err);
      }
      if (res.ok || opts.accept?.includes(res.status)) return res;
      const retryAfter = Number(res.headers.get('retry-after'));
      if (
        retriable &&
        attempt < 4 &&
        (res.status === 429 || res.status === 503) &&
        Number.isFinite(retryAfter) &&
        retryAfter <= 10
      ) {
        await res.body?.cancel();
        await sleep(Math.max(retryAfter, 0.2) * 1000);
        continue;
      }
      throw await errorFromResponse(res);
    }
  }

  async json<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, path, opts);
    const text = await res.text();
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CliError(`The API answered ${method} ${path} with something that is not JSON.`, EXIT.API);
    }
  }

  get = <T = any>(path: string, query?: Query) => this.json<T>('GET', path, { query });
  post = <T = any>(path: string, json?: unknown, query?: Query) =>
    this.json<T>('POST', path, { json: json ?? {}, query });
  put = <T = any>(path: string, json: unknown) => this.json<T>('PUT', path, { json });
  patch = <T = any>(path: string, json: unknown, query?: Query) => this.json<T>('PATCH', path, { json, query });
  delete = <T = any>(path: string, query?: Query) => this.json<T>('DELETE', path, { query });
}

function networkError(url: string, err: unknown): CliError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (err as Error).message;
  const where = new URL(url);
  return new CliError(
    `Cannot reach the API at ${where.origin} (${why}). Check --base-url or GANTRY_BASE_URL.`,
    EXIT.API,
  );
}
