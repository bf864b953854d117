import type { GraphQLFormattedError } from 'graphql';
import { GraphQLError } from 'graphql';
import { unwrapResolverError } from '@apollo/server/errors';
import type { BaseLogger } from 'pino';
import { AppError, isAppError } from '../../domain/errors';

/** Apollo's own codes for a request that is not a valid GraphQL operation: the client's mistake. */
const CLIENT_CODES = new Set([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
]);

/**
 * graphql-js's hints name schema members the caller did not ask for: `Did you mean "viewer"?`,
 * `Did you mean the enum value "FIXED"?`, `Did you mean to use an inline fragment on "X"?`.
 * Names and enum values never contain `?`.
 */
const SUGGESTION = /\s*Did you mean [^?]*\?/g;

/**
 * The contract's error table in GraphQL form: `extensions.code` is the same code REST puts in
 * `error.code`, with the HTTP status it would have had, the details and the request id. Anything
 * unexpected becomes `internal` with no message or stack from inside. Every 5xx is logged here,
 * once, with its cause (as REST's sendError does): `log` is the request's logger, which carries
 * its reqId.
 */
export function formatError(
  formatted: GraphQLFormattedError,
  error: unknown,
  requestId: string | undefined,
  log: Pick<BaseLogger, 'warn' | 'error'>,
  opts: { hideSuggestions: boolean } = { hideSuggestions: false },
): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  const message = opts.hideSuggestions
    ? formatted.message.replace(SUGGESTION, '')
    : formatted.message;
  const base = { message, locations: formatted.locations, path: formatted.path };
  const ext = (e: AppError) => ({
    code: e.code,
    status: e.status,
    ...(e.details?.length ? { details: e.details } : {}),
    ...(e.retryAfter !== undefined ? { retryAfter: e.retryAfter } : {}),
    ...(requestId ? { request_id: requestId } : {}),
  });
  if (isAppError(original)) {
    if (original.code === 'internal') log.error({ err: original }, 'unhandled GraphQL error');
    // a dependency failed: the log keeps the error with its cause (the answer never does)
    else if (original.status >= 500)
      log.warn({ err: original }, 'GraphQL request failed: a dependency is unavailable');
    return { ...base, message: original.message, extensions: ext(original) };
  }
  const code = formatted.extensions?.code;
  if (typeof code === 'string' && CLIENT_CODES.has(code))
    return { ...base, extensions: ext(new AppError('invalid_request', message)) };
  // Input coercion errors (bad enum, wrong scalar type) arrive as plain GraphQLErrors without a
  // resolver behind them: still the client's mistake.
  if (original instanceof GraphQLError && !original.originalError && !formatted.path)
    return { ...base, extensions: ext(new AppError('invalid_request', message)) };
  log.error({ err: original }, 'unhandled GraphQL error');
  return {
    ...base,
    message: 'internal error; quote request_id when reporting it',
    extensions: ext(new AppError('internal', 'internal')),
  };
}
