/**
 * The one error type routes throw, and its wire shape
 * `{error: {message, type, param, code}}` (spec: Errors).
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'request_too_large'
  | 'insufficient_credit'
  | 'rate_limit_error'
  | 'api_error'
  | 'service_unavailable';

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ErrorType,
    readonly param: string | null = null,
    readonly code: string | null = null,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new ApiError(400, message, 'invalid_request_error', param, code);
export const unauthorized = (message: string) =>
  new ApiError(401, message, 'authentication_error', null, 'invalid_api_key');
export const forbidden = (message: string, code: string | null = null) =>
  new ApiError(403, message, 'permission_error', null, code);
export const notFound = (message: string, code: string | null = null) =>
  new ApiError(404, message, 'not_found_error', null, code);
export const conflict = (message: string, code: string | null = null) =>
  new ApiError(409, message, 'conflict_error', null, code);
export const payloadTooLarge = (message: string, param: string | null = null) =>
  new ApiError(413, message, 'request_too_large', param, 'request_too_large');
export const paymentRequired = (message: string, code = 'insufficient_credit') =>
  new ApiError(402, message, 'insufficient_credit', null, code);
export const tooManyRequests = (message: string, retryAfterSeconds: number) =>
  new ApiError(429, message, 'rate_limit_error', null, 'rate_limit_exceeded', {
    'Retry-After': String(Math.ceil(retryAfterSeconds)),
  });
export const serviceUnavailable = (message: string, retryAfterSeconds = 2) =>
  new ApiError(503, message, 'service_unavailable', null, 'service_unavailable', {
    'Retry-After': String(retryAfterSeconds),
  });
