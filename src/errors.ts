import {
  ERROR_STATUS,
  type ErrorCode,
  type ErrorEnvelope,
  type ForbiddenReason,
  type UnauthenticatedReason,
} from '../contracts/errors';

/** The one error type of the gateway: a code from DESIGN section 4 and its fixed status. */
export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }

  /** Every envelope has `details`, and every `details` the request id (the same as `X-Request-Id`). */
  toEnvelope(requestId: string): ErrorEnvelope {
    return { error: { code: this.code, message: this.message, details: { ...this.details, requestId } } };
  }
}

export const notFound = (message = 'Not found'): ApiError => new ApiError('not_found', message);

/** A 401 with what can safely be said of why (contracts/errors.ts UNAUTHENTICATED_REASONS). */
export const unauthenticated = (reason: UnauthenticatedReason, message: string): ApiError =>
  new ApiError('unauthenticated', message, { reason }, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });

/** A 403 and which kind of refusal it is (contracts/errors.ts FORBIDDEN_REASONS). */
export const forbidden = (reason: ForbiddenReason, message: string): ApiError =>
  new ApiError('forbidden', message, { reason });
