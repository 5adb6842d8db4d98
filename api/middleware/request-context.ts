/**
 * Request ids and per-request structured logging. A client-supplied
 * X-Request-Id is kept when it is a sane token, so calls can be traced across
 * services; otherwise one is made. Each request ends with one line,
 * `request completed` (info; warn for a 4xx) or `request errored` (error, with
 * the cause), naming the request's id, method and path (never its query or
 * headers), its status, its time, and the project and key once authenticated.
 * Authorization headers never reach the log (see platform/logger.ts redaction).
 *
 * Not pino-http: it made a child logger per request, with its bindings
 * serialized and redacted, and again for the principal's; that was 7% of the
 * API's CPU per queue submit, for lines that are mostly off (LOG_LEVEL=warn).
 * Here `req.log` is made only when something logs through it.
 */
import { randomUUID } from 'node:crypto';
import { IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from '../../platform/logger';

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id), set by requestLogging. */
    id?: string;
    /** A logger whose lines name the request (and its principal once authenticated), set by requestLogging. */
    log?: Logger;
  }
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** What one request's lines are bound to, until its logger is made. */
const BINDINGS = Symbol('gantry.requestLogBindings');
/** An unexpected failure behind a 5xx, for the request's closing line (see noteResponseError). */
const RESPONSE_ERROR = Symbol('gantry.responseError');
type Answered = ServerResponse & { [RESPONSE_ERROR]?: Error };

/** The error responder's word on what went wrong: the closing line names the cause, not the answer's body. */
export function noteResponseError(res: ServerResponse, err: Error): void {
  (res as Answered)[RESPONSE_ERROR] = err;
}

/** A request's log state: the process's logger, what its lines are bound to, and its own logger once made. */
interface RequestLog {
  logger: Logger;
  bindings: Record<string, unknown>;
  made?: Logger;
}
type Bound = IncomingMessage & { [BINDINGS]?: RequestLog };

// `req.log` is one getter on the prototype, reading the request's state: defining it on each request
// (Object.defineProperty) cost about 10 µs of CPU a request, some 40% of what its logging costs.
Object.defineProperty(IncomingMessage.prototype, 'log', {
  configurable: true,
  get(this: Bound): Logger | undefined {
    const state = this[BINDINGS];
    return state && (state.made ??= state.logger.child(state.bindings));
  },
});

/** Adds fields to every later line of the request (the principal's project and key). */
export function bindToRequestLog(req: IncomingMessage, fields: Record<string, unknown>): void {
  const state = (req as Bound)[BINDINGS];
  if (!state) return;
  if (state.made) state.made.setBindings(fields);
  else Object.assign(state.bindings, fields);
}

const pathOf = (url = '/') => {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
};

/** Sets the request id and `req.log`, and logs the request's one line when its response ends. */
export function requestLogging(logger: Logger) {
  return (req: IncomingMessage, res: ServerResponse, next?: () => void): void => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', id);
    req.id = id;
    const started = Date.now();
    (req as Bound)[BINDINGS] = {
      logger,
      // Only what traces a call: no headers, no body, no query (queries can carry tokens such as
      // signed URLs' signatures).
      bindings: { req: { id, method: req.method, path: pathOf(req.url) } },
    };

    // A response emits 'close' once: after 'finish' when its answer was sent, alone when the caller left.
    res.on('close', (): void => {
      const err = (res as Answered)[RESPONSE_ERROR];
      const failed = err !== undefined || res.statusCode >= 500;
      const level = failed ? 'error' : res.statusCode >= 400 ? 'warn' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const line = { res: { statusCode: res.statusCode }, responseTime: Date.now() - started };
      if (failed)
        req.log!.error(
          { ...line, err: err ?? new Error(`failed with status code ${res.statusCode}`) },
          'request errored',
        );
      else if (!res.writableFinished) req.log![level](line, 'request aborted');
      else req.log![level](line, 'request completed');
    });
    next?.();
  };
}
