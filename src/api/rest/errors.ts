import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError, type ErrorCode } from '../../domain/errors';

export interface ErrorBody {
  status: 'error';
  error: { code: ErrorCode; message: string; details?: unknown[]; request_id: string };
}

export function errorBody(e: AppError, requestId: string): ErrorBody {
  return {
    status: 'error',
    error: {
      code: e.code,
      message: e.message,
      ...(e.details?.length ? { details: e.details } : {}),
      request_id: requestId,
    },
  };
}

/** Framework errors (body parsing, limits) become the contract's codes, never a 500. */
export function toAppError(e: unknown): AppError {
  if (isAppError(e)) return e;
  const fe = e as Partial<FastifyError>;
  const status = fe.statusCode ?? 500;
  if (status === 413)
    return new AppError(
      'payload_too_large',
      'request body is larger than this endpoint accepts (5 MB for content and GraphQL, 500 KB for an image search)',
    );
  if (status === 415)
    return new AppError(
      'unsupported_media_type',
      'request body must be JSON (Content-Type: application/json)',
    );
  if (status === 429) return new AppError('rate_limited', fe.message ?? 'rate limit exceeded');
  if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
    return new AppError('invalid_request', 'body is empty; expected JSON');
  if (status >= 400 && status < 500) {
    const json = e instanceof SyntaxError || /JSON/i.test(fe.message ?? '');
    return new AppError(
      'invalid_request',
      json ? `body is not valid JSON: ${fe.message}` : (fe.message ?? 'bad request'),
    );
  }
  return new AppError('internal', 'internal error; quote request_id when reporting it');
}

export function sendError(req: FastifyRequest, reply: FastifyReply, e: unknown): FastifyReply {
  const err = toAppError(e);
  if (err.code === 'internal') req.log.error({ err: e }, 'unhandled error');
  else req.log.info({ code: err.code, message: err.message }, 'request refused');
  if (err.retryAfter !== undefined) reply.header('Retry-After', String(err.retryAfter));
  return reply
    .status(err.status)
    .type('application/json; charset=utf-8')
    .send(errorBody(err, req.id));
}
