import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** One entry of `error.details`: where the input was wrong and why. */
export interface ErrorDetail {
  path: string;
  message: string;
}

/**
 * The one error type of svc. Anything thrown inside a request that is not an AppError becomes
 * 500 `internal_error`; the error handler turns an AppError into CONTRACT section 2's body:
 * `{"error":{"code","message","details"?}}`.
 */
export class AppError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    /** Extra response headers, e.g. `Retry-After`. */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
  }

  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

/** Codes of the errors Hono itself raises (HTTPException below 500), by status. */
export const HTTP_ERROR_CODES: Readonly<Record<number, string>> = {
  400: 'bad_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
};

/** The store or the database cannot be reached; answered 503 `unavailable`. */
export class UnavailableError extends AppError {
  constructor(part: 'store' | 'db', cause?: unknown) {
    super(503, 'unavailable', `The ${part === 'store' ? 'session store' : 'database'} is unavailable, try again shortly`);
    this.cause = cause;
  }
}

export const validationFailed = (details: ErrorDetail[], message = 'The request is not valid') =>
  new AppError(400, 'validation_failed', message, details);
export const notFound = (message = 'Not found') => new AppError(404, 'not_found', message);
export const unauthenticated = (message = 'You need to log in') => new AppError(401, 'unauthenticated', message);
export const forbidden = (message = 'You are not allowed to do this') => new AppError(403, 'forbidden', message);
