/**
 * The provider's error vocabulary, shaped like Stripe's `{ error: { type, code?, message, param? } }`, so the
 * checkout app's client code can be written against a realistic card processor.
 */

export type ErrorType = 'invalid_request_error' | 'card_error' | 'idempotency_error' | 'api_error';

export interface ErrorDetails {
  code?: string;
  param?: string;
}

/** An error that maps one-to-one onto an HTTP response. Anything else thrown becomes a 500 `api_error`. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly details: ErrorDetails;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: number,
    type: ErrorType,
    message: string,
    details: ErrorDetails = {},
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.type = type;
    this.details = details;
    this.headers = headers;
  }

  toBody(): { error: { type: ErrorType; code?: string; message: string; param?: string } } {
    // Fixed key order (type, code, message, param) so identical errors serialize identically.
    return {
      error: {
        type: this.type,
        ...(this.details.code === undefined ? {} : { code: this.details.code }),
        message: this.message,
        ...(this.details.param === undefined ? {} : { param: this.details.param }),
      },
    };
  }
}

export function invalidRequest(message: string, details: ErrorDetails = {}): ApiError {
  return new ApiError(400, 'invalid_request_error', message, details);
}

/** Node's system errors (EADDRINUSE, ECONNREFUSED, …) carry a string `code`; narrow without `any`. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') {
    return err.code;
  }
  return undefined;
}
