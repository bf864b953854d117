import type { Client, estypes } from '@elastic/elasticsearch';
import { GroupCommit, WORKER_LINGER_MS } from '../group-commit';

/** One bulk action and, for a create or an index, its document. */
export type BulkWrite = [action: estypes.BulkOperationContainer, doc?: object];

/** Submissions one `_bulk` carries at most (each a few documents). */
const MAX_SUBMISSIONS = 500;

/**
 * One `_bulk` for the create-only writes that finish a worker's jobs (image counts, webhook
 * facts) from every adapter of this process: they are made together after each result, and a
 * request costs Elasticsearch more than the few small documents in it, so a fact shares the
 * image count's request instead of costing one of its own (docs/engines.md).
 */
export class BulkLane {
  private readonly group = new GroupCommit(
    (batch: BulkWrite[][]) => this.send(batch),
    MAX_SUBMISSIONS,
    WORKER_LINGER_MS,
  );

  constructor(private readonly client: () => Client) {}

  /** Resolves with one response item per write, in order, once the request holding them ended. */
  submit(writes: BulkWrite[]): Promise<estypes.BulkResponseItem[]> {
    return writes.length ? this.group.submit(writes) : Promise.resolve([]);
  }

  private async send(batch: BulkWrite[][]): Promise<estypes.BulkResponseItem[][]> {
    const r = await this.client().bulk({
      operations: batch.flat().flatMap(([action, doc]) => (doc ? [action, doc] : [action])),
    });
    const items = r.items.map((i) => Object.values(i)[0] as estypes.BulkResponseItem);
    let at = 0;
    return batch.map((writes) => items.slice(at, (at += writes.length)));
  }
}
