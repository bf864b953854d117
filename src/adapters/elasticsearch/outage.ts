import { errors } from '@elastic/elasticsearch';
import { AppError } from '../../domain/errors';

export const unavailable = (message: string, retryAfterSeconds = 5, cause?: unknown): AppError =>
  new AppError('unavailable', message, undefined, retryAfterSeconds, { cause });

/**
 * The Elasticsearch classifier (PortPolicy): transport failures and an overloaded or electing
 * cluster become 503s (with Retry-After); anything else is undefined and stays a bug (500).
 */
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
