import { errors } from '@elastic/elasticsearch';
import { AppError } from '../../domain/errors';

/** Optimistic-concurrency retries before a write gives up with 503. */
export const CAS_RETRIES = 8;

export const unavailable = (message: string, retryAfterSeconds = 5, cause?: unknown): AppError =>
  new AppError('unavailable', message, undefined, retryAfterSeconds, { cause });

/**
 * Transport failures and an overloaded or electing cluster become 503s (with Retry-After);
 * anything else stays a bug (500). Every Elasticsearch adapter runs its calls through this.
 */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw toUnavailable(e) ?? e;
  }
}

export function toUnavailable(e: unknown): AppError | undefined {
  if (
    e instanceof errors.ConnectionError ||
    e instanceof errors.TimeoutError ||
    e instanceof errors.NoLivingConnectionsError
  )
    return unavailable('the search engine is unreachable; try again shortly', 5, e);
  if (e instanceof errors.ResponseError && (e.statusCode === 429 || e.statusCode === 503))
    return unavailable('the search engine is overloaded; try again shortly', 5, e);
  // A primary shard is moving to another node (a node left the cluster): the write can be
  // sent again in a moment.
  if (
    e instanceof errors.ResponseError &&
    [
      'unavailable_shards_exception',
      'no_shard_available_action_exception',
      'cluster_block_exception',
    ].includes(String(e.body?.error?.type))
  )
    return unavailable('the search engine is recovering a shard; try again shortly', 5, e);
  return undefined;
}

/** Exponential backoff with jitter between optimistic-concurrency retries. */
export const backoff = (attempt: number): Promise<void> =>
  new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 5 * 2 ** attempt)));
