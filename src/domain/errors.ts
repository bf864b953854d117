/**
 * The one error table shared by REST and GraphQL (contract §2). Services throw these;
 * transports map `status`/`code` onto their wire format and never invent their own.
 */
export type ErrorCode =
  | 'invalid_request'
  | 'unauthorized'
  | 'token_expired'
  | 'payment_required'
  | 'forbidden'
  | 'not_found'
  | 'unsupported_version'
  | 'conflict'
  | 'dataset_not_ready'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'internal'
  | 'unavailable';

export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  token_expired: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  unsupported_version: 406,
  conflict: 409,
  dataset_not_ready: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

/** One problem in a request: which item/field, or which parameter and position. */
export interface ErrorDetail {
  index?: number;
  id?: string;
  field?: string;
  param?: string;
  position?: number;
  value?: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Seconds a client should wait before retrying (429, 503). */
    readonly retryAfter?: number,
    /** What went wrong underneath: logged with the error, never sent to a client. */
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AppError';
    this.status = STATUS_BY_CODE[code];
  }
}

export const invalid = (message: string, details?: ErrorDetail[]): AppError =>
  new AppError('invalid_request', message, details);

export const notFound = (message: string): AppError => new AppError('not_found', message);

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;
