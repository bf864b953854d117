import { Client, ClusterConnectionPool } from '@elastic/elasticsearch';

/**
 * The client's default pool (WeightedConnectionPool) answers "no living connections" for
 * hundreds of requests once every node has failed a few times — elastic/elasticsearch-js#1714:
 * after a whole-cluster restart the workers measured 110–160 s of NoLivingConnectionsError
 * with the cluster already answering. This pool sends to every node while all are dead, takes
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

/** The installation's Elasticsearch client. */
export function esClient(nodes: string | string[]): Client {
  return new Client({
    nodes,
    ConnectionPool: PromptConnectionPool,
    requestTimeout: 30_000,
    maxRetries: 2,
    // a node that dies is taken out of rotation and pinged before it is used again
    resurrectStrategy: 'ping',
  });
}
