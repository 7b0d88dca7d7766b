import { ERROR_STATUS, type ErrorCode, type ErrorEnvelope } from '../contracts/errors';

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

  toEnvelope(): ErrorEnvelope {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

export const notFound = (message = 'Not found'): ApiError => new ApiError('not_found', message);
