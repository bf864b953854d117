import type { Hit } from './item-index';

/** More than every worker slot of a process reads between its reads and its writes. */
const MAX_KNOWN = 4096;

/**
 * Item documents as a worker's realtime read found them, with their versions, kept for the
 * result write that follows: the write can then go with `if_seq_no` at once instead of reading
 * the item again (one round trip per image less). Stale is harmless: a document changed since
 * makes the versioned write conflict, and the writer reads it again. Each is used once, and
 * the oldest go first when the memory is full (a job that never wrote, say).
 */
export class KnownVersions {
  private readonly hits = new Map<string, Hit>();

  remember(index: string, hit: Hit): void {
    if (hit._source === undefined || hit._seq_no === undefined || hit._primary_term === undefined)
      return;
    const key = `${index}\u0000${hit._id}`;
    this.hits.delete(key);
    if (this.hits.size >= MAX_KNOWN) this.hits.delete(this.hits.keys().next().value!);
    this.hits.set(key, hit);
  }

  take(index: string, id: string): Hit | undefined {
    const key = `${index}\u0000${id}`;
    const hit = this.hits.get(key);
    this.hits.delete(key);
    return hit;
  }
}
