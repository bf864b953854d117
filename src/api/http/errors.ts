import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError, type ErrorCode } from '../../domain/errors';
import { drainRequestBody } from './body-drain';

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

/** Fastify's own refusals that have a clearer wording than its message. */
const FRAMEWORK_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: 'body is empty; expected JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'body length does not match the Content-Length header',
  FST_ERR_BAD_URL: 'the path is not a valid URL (bad percent-encoding)',
  FST_ERR_MAX_PARAM_LENGTH: 'a path segment is longer than any organisation or dataset name',
};

const size = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MB` : `${Math.round(bytes / 1024)} KB`;

/**
 * Framework errors (body parsing, limits, routing) become the contract's codes, never a 500.
 * `bodyLimit` is the route's, to say which limit a 413 broke.
 */
function toAppError(e: unknown, bodyLimit?: number): AppError {
  if (isAppError(e)) return e;
  const fe = e as Partial<FastifyError>;
  const status = fe.statusCode ?? 500;
  if (status === 413)
    return new AppError(
      'payload_too_large',
      bodyLimit
        ? `request body is larger than the ${size(bodyLimit)} this endpoint accepts`
        : 'request body is larger than this endpoint accepts',
    );
  if (status === 415)
    return new AppError(
      'unsupported_media_type',
      'request body must be JSON (Content-Type: application/json)',
    );
  if (status === 429) return new AppError('rate_limited', fe.message ?? 'rate limit exceeded');
  const known = fe.code && FRAMEWORK_MESSAGES[fe.code];
  if (known) return new AppError('invalid_request', known);
  if (status >= 400 && status < 500) {
    const json = e instanceof SyntaxError || /JSON/i.test(fe.message ?? '');
    return new AppError(
      'invalid_request',
      json ? `body is not valid JSON: ${fe.message}` : (fe.message ?? 'bad request'),
    );
  }
  return new AppError('internal', 'internal error; quote request_id when reporting it');
}

export async function sendError(
  req: FastifyRequest,
  reply: FastifyReply,
  e: unknown,
): Promise<FastifyReply> {
  const err = toAppError(e, req.routeOptions?.bodyLimit);
  if (err.code === 'internal') req.log.error({ err: e }, 'unhandled error');
  // a dependency failed: the log keeps the error with its cause (the answer never does)
  else if (err.status >= 500)
    req.log.warn({ err: e }, 'request failed: a dependency is unavailable');
  else req.log.info({ code: err.code, message: err.message }, 'request refused');
  // Set here too: framework errors (bad URL, 404) skip the onRequest hook that sets it.
  reply.header('X-Request-Id', req.id);
  if (err.retryAfter !== undefined) reply.header('Retry-After', String(err.retryAfter));
  // A refused request may still be sending its body: answer once it is read (body-drain.ts).
  if (!(await drainRequestBody(req.raw))) reply.header('Connection', 'close');
  return reply
    .status(err.status)
    .type('application/json; charset=utf-8')
    .send(errorBody(err, req.id));
}
