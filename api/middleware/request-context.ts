/**
 * Request ids and per-request structured logging. A client-supplied
 * X-Request-Id is kept when it is a sane token, so calls can be traced across
 * services; otherwise one is made. Authorization headers never reach the log
 * (see platform/logger.ts redaction).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../../platform/logger';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestLogging(logger: Logger) {
  return pinoHttp({
    logger,
    // Our serializers read the raw request and response themselves: pino-http's wrappers first copy
    // each into a plain object with every header, per request, for fields no log line keeps.
    wrapSerializers: false,
    genReqId(req: IncomingMessage, res: ServerResponse) {
      const incoming = req.headers['x-request-id'];
      const id = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
      res.setHeader('X-Request-Id', id);
      return id;
    },
    customLogLevel(_req, res, err) {
      if (err || res.statusCode >= 500) return 'error';
      if (res.statusCode >= 400) return 'warn';
      return 'info';
    },
    serializers: {
      req(req: { id: unknown; method: string; url: string; remoteAddress?: string }) {
        // Only what is needed to trace a call: no headers, no body, no query values
        // beyond the path (queries can carry tokens such as signed URLs).
        return { id: req.id, method: req.method, path: String(req.url).split('?')[0] };
      },
      res(res: { statusCode: number }) {
        return { statusCode: res.statusCode };
      },
    },
  });
}
