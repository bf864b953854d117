import type { Hit } from './item-index';

/** More than every worker slot of a process reads between its reads and its writes. */
const MAX_KNOWN = 1024;
/** A read older than this is not worth a write that may conflict: read again. */
const MAX_AGE_MS = 60_000;

/**
 * Pending items as a worker's realtime read found them, with their versions, kept for the
 * result write that follows: the write can then go with `if_seq_no` at once instead of reading
 * the item again (one round trip per image less). Stale is harmless: a document changed since
 * makes the versioned write conflict, and the writer reads it again; a dataset deleted since
 * answers index_not_found (the item template forbids creating the index on a write). Only
 * pending items are kept (a processed one carries its embedding, and no result write follows
 * a read that finds one), each is used once, and the oldest go first when the memory is full.
 */
export class KnownVersions {
  private readonly hits = new Map<string, { hit: Hit; at: number }>();

  remember(index: string, hit: Hit): void {
    if (
      hit._source?.state !== 'pending' ||
      hit._seq_no === undefined ||
      hit._primary_term === undefined
    )
      return;
    const key = `${index}\u0000${hit._id}`;
    this.hits.delete(key);
    if (this.hits.size >= MAX_KNOWN) this.hits.delete(this.hits.keys().next().value!);
    this.hits.set(key, { hit, at: Date.now() });
  }

  take(index: string, id: string): Hit | undefined {
    const key = `${index}\u0000${id}`;
    const known = this.hits.get(key);
    this.hits.delete(key);
    return known && Date.now() - known.at < MAX_AGE_MS ? known.hit : undefined;
  }
}
