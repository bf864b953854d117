import {
  Client,
  ClusterConnectionPool,
  SniffingTransport,
  type TransportRequestOptions,
  type TransportRequestParams,
} from '@elastic/elasticsearch';
import { unavailable } from './outage';
import { VectorTextSerializer } from './vector-text';

/**
 * The client's default pool (WeightedConnectionPool) answers "no living connections" for
 * hundreds of requests once every node has failed a few times (elastic/elasticsearch-js#1714),
 * so after a whole-cluster restart workers would see minutes of NoLivingConnectionsError with
 * the cluster already answering. This pool sends to every node while all are dead, takes
 * back the first that answers at once, and pings the others after 1, 2, 4, 8 and then every
 * 16 s (the stock 60 s × 2^n would leave a restarted cluster on one node for up to 32 min).
 */
export class PromptConnectionPool extends ClusterConnectionPool {
  constructor(opts: ConstructorParameters<typeof ClusterConnectionPool>[0]) {
    super(opts);
    this.resurrectTimeout = 1000;
    this.resurrectTimeoutCutoff = 4;
  }
}

const SEARCH = /\/_search$/;
const COUNT = /\/_count$/;
const REFRESH = /^\/?([^/]*)\/_refresh$/;

/**
 * Searches and counts answer from every shard they ask, or fail. Elasticsearch's default is to
 * answer from the shards it can reach and list the others in `_shards.failed`: while a cluster
 * recovers, the recovery sweep over every item index then found some datasets' pending items
 * and silently not the rest, and a search or a count came back short. A search is sent with
 * `allow_partial_search_results=false` (Elasticsearch then refuses it, 503); a count has no
 * such switch, so its answer is checked.
 *
 * A refresh is checked the same way: Elasticsearch answers 200 when a copy did not refresh, and a
 * search served by that copy would miss what the caller refreshed for — a client's write about
 * to be answered 202 (contract §4), or the image counts a fixed allowance is decided on.
 */
class WholeAnswerTransport extends SniffingTransport {
  // Widened to the base class's implementation signature; its overloads only narrow the result.
  override async request(
    params: TransportRequestParams,
    options?: TransportRequestOptions,
  ): Promise<never> {
    const qs = params.querystring;
    if (SEARCH.test(params.path))
      params.querystring =
        typeof qs === 'string'
          ? `${qs}${qs ? '&' : ''}allow_partial_search_results=false`
          : { allow_partial_search_results: false, ...qs };
    const result = (await super.request(params, options as never)) as unknown;
    const refreshed = REFRESH.exec(params.path);
    if (refreshed || SEARCH.test(params.path) || COUNT.test(params.path)) {
      const body = (options?.meta ? (result as { body: unknown }).body : result) as {
        _shards?: { failed?: number; successful?: number; total?: number };
      };
      const { failed = 0, successful = 0, total = 0 } = body?._shards ?? {};
      if (failed > 0)
        throw refreshed
          ? unavailable(
              `the search engine refreshed ${successful} of ${total} copies of ${decodeURIComponent(refreshed[1]!)}; try again shortly`,
              1,
            )
          : unavailable('the search engine is recovering a shard; try again shortly');
    }
    return result as never;
  }
}

/** The installation's Elasticsearch client. */
export function esClient(nodes: string | string[]): Client {
  return new Client({
    nodes,
    Transport: WholeAnswerTransport,
    ConnectionPool: PromptConnectionPool,
    Serializer: VectorTextSerializer,
    requestTimeout: 30_000,
    maxRetries: 2,
    // a node that dies is taken out of rotation and pinged before it is used again
    resurrectStrategy: 'ping',
  });
}
