/**
 * Every failure leaves the API in the spec's error shape. Known causes (body
 * parsing, Temporal or PostgreSQL unavailable) map to their status; anything
 * else is a 500 that names the request id and is logged in full, server side.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import multer from 'multer';
import { BlobTooLargeError } from '../../providers/storage/blob-store';
import { ApiError, badRequest, conflict, notFound, payloadTooLarge, serviceUnavailable } from '../errors';
import { noteResponseError } from './request-context';
import { sendJson } from '../json-response';

interface BodyParserError extends Error {
  type?: string;
  limit?: number;
  status?: number;
}

const PG_UNAVAILABLE = /^(08|57P0)/; // connection exceptions, admin/crash shutdown
const UNIQUE_VIOLATION = '23505';
// The database's host refused, dropped, or cannot be found (its DNS entry gone, as a compose
// service's is while it restarts): all outages of the moment, worth a retry.
const NET_UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

function isTemporalUnavailable(err: unknown): boolean {
  // @temporalio/client wraps gRPC failures in ServiceError; 14 = UNAVAILABLE, 4 = DEADLINE_EXCEEDED.
  const e = err as { name?: string; code?: number; cause?: { code?: number } };
  if (e?.name !== 'ServiceError') return false;
  const code = e.code ?? e.cause?.code;
  return code === 14 || code === 4;
}

function toApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  const e = err as BodyParserError & { code?: string };
  switch (e?.type) {
    case 'entity.parse.failed':
      return badRequest(`Malformed JSON body: ${e.message}.`, null, 'invalid_json');
    case 'entity.too.large':
      return payloadTooLarge(`Request body is larger than the limit of ${e.limit} bytes.`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return badRequest(e.message, null, 'unsupported_encoding');
    case 'request.size.invalid':
      return badRequest('The body is not as long as its Content-Length says.', null, 'invalid_content_length');
    case 'request.aborted':
      return badRequest('The request was aborted before its body was received.', null, 'request_aborted');
  }
  if (err instanceof multer.MulterError) {
    switch (err.code) {
      case 'LIMIT_FILE_SIZE':
        return payloadTooLarge('The file is larger than the upload limit.', 'file');
      case 'LIMIT_UNEXPECTED_FILE':
        return badRequest(
          `Unexpected file field '${err.field}': send exactly one file, as 'file'.`,
          err.field ?? null,
          'unexpected_file',
        );
      default:
        return badRequest(`Malformed multipart request: ${err.message}.`, err.field ?? null, 'invalid_multipart');
    }
  }
  if (err instanceof BlobTooLargeError)
    return payloadTooLarge(`The file is larger than the limit of ${err.limit} bytes.`, 'file');
  // multer's own word for a client that closed the connection mid-upload (make-middleware.js): the
  // client is gone, so this is its 400, not a server error.
  if (e instanceof Error && e.message === 'Request aborted' && (e as { storageErrors?: unknown }).storageErrors) {
    return badRequest('The request was aborted before its body was received.', null, 'request_aborted');
  }
  if (/^(Unexpected end of form|Malformed part header|Multipart: Boundary not found)/.test(String(e?.message))) {
    return badRequest(`Malformed multipart request: ${e.message}.`, null, 'invalid_multipart');
  }
  // A unique constraint that a check-then-write lost to a concurrent request (or a check that was
  // missing): the state conflicts with the request, which is the caller's 409, not a server error.
  if (e?.code === UNIQUE_VIOLATION) {
    return conflict(
      'The request conflicts with what exists now (a name or id already taken); read it again and retry.',
      'conflict',
    );
  }
  if (isTemporalUnavailable(err)) {
    return serviceUnavailable('The workflow service (Temporal) is unavailable. Retry with exponential backoff.');
  }
  if (
    (typeof e?.code === 'string' && (PG_UNAVAILABLE.test(e.code) || NET_UNAVAILABLE.has(e.code))) ||
    /Connection terminated|timeout exceeded when trying to connect/i.test(String(e?.message))
  ) {
    return serviceUnavailable('The database is unavailable. Retry with exponential backoff.');
  }
  return null;
}

export function routeNotFound(req: Request, _res: Response, next: NextFunction) {
  next(notFound(`No route for ${req.method} ${req.path}.`, 'route_not_found'));
}

/** What the caller is told of `err`: its own error when known, else a 500 that names the request id. */
function apiErrorOf(err: unknown, requestId: string): { apiError: ApiError; known: boolean } {
  const known = toApiError(err);
  return {
    known: known !== null,
    apiError:
      known ??
      new ApiError(
        500,
        `Internal server error. Quote request id ${requestId} when reporting it.`,
        'api_error',
        null,
        'internal_error',
      ),
  };
}

/**
 * Answers `err` in the spec's error shape: the API's (through `errorHandler`) and the gateway's
 * (a plain node:http server), so both answer every failure alike.
 */
export function sendError(req: IncomingMessage, res: ServerResponse, err: unknown): void {
  const { apiError, known } = apiErrorOf(err, String(res.getHeader('X-Request-Id') ?? ''));
  if (apiError.status >= 500) {
    req.log?.error({ err }, 'request failed');
  }
  if (res.headersSent) {
    // A streamed response already started: the connection is all we can end.
    res.destroy(err instanceof Error ? err : undefined);
    return;
  }
  if (!known && err instanceof Error) noteResponseError(res, err);
  sendJson(res, apiError.status, apiError.toBody(), apiError.headers);
}

export function errorHandler(err: unknown, req: Request, res: Response, _next: NextFunction) {
  sendError(req, res, err);
}
