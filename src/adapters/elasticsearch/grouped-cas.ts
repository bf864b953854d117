import type { Client } from '@elastic/elasticsearch';
import { GroupCommit, WORKER_LINGER_MS } from '../group-commit';
import type { ItemDoc } from './document';
import type { Hit } from './item-index';

/** What became of one change in a group: written, nothing to write, or left to the caller. */
export type GroupedOutcome = 'written' | 'unchanged' | 'retry';

interface Pending {
  index: string;
  id: string;
  change: (doc: ItemDoc) => ItemDoc | undefined;
  /** The document and its version as the caller last read it: written against without a read. */
  known?: Hit;
}

/** Enough for every worker slot of a few processes; a bulk of 1,420-float items stays ~5 MB. */
const MAX_GROUP = 128;

/**
 * Workers' item results as group commits (GroupCommit): the results finished while one
 * read-check-write is in flight go together in the next, as one realtime `mget` (of the items
 * the caller did not read a moment ago) and one `_bulk` with each document's
 * `if_seq_no`/`if_primary_term`, instead of a GET and a PUT per image.
 * Each caller's promise settles only once its own write is acknowledged, so a job is never
 * acknowledged before its result is stored.
 *
 * Anything but a clean outcome (a conflict, a per-document error, a field the mapping lacks) is
 * answered `retry`: the caller's own one-item loop reads again and handles it.
 */
export class GroupedCas {
  private readonly group = new GroupCommit(
    (batch: Pending[]) => this.commit(batch),
    MAX_GROUP,
    WORKER_LINGER_MS,
  );

  constructor(private readonly client: () => Client) {}

  submit(
    index: string,
    id: string,
    change: (doc: ItemDoc) => ItemDoc | undefined,
    known?: Hit,
  ): Promise<GroupedOutcome> {
    return this.group.submit({ index, id, change, ...(known ? { known } : {}) });
  }

  private async commit(group: Pending[]): Promise<GroupedOutcome[]> {
    const out: GroupedOutcome[] = group.map(() => 'retry');
    // Two results for one item in one group: the second goes alone, after the first.
    const seen = new Set<string>();
    const unique = group.flatMap((p, i) => {
      const key = `${p.index}\u0000${p.id}`;
      if (seen.has(key)) return [];
      seen.add(key);
      return [i];
    });
    // Only what no caller read a moment ago is read now (KnownVersions).
    const toRead = unique.filter((i) => !group[i]!.known);
    const read = toRead.length
      ? (
          await this.client().mget<ItemDoc>({
            docs: toRead.map((i) => ({ _index: group[i]!.index, _id: group[i]!.id })),
            realtime: true,
          })
        ).docs
      : [];
    const readAt = new Map(toRead.map((i, k) => [i, read[k]!]));
    const ops: object[] = [];
    const written: number[] = [];
    unique.forEach((i) => {
      const known = group[i]!.known;
      const d = known ? { ...known, found: true as const } : readAt.get(i)!;
      // per-document errors and absent documents go to the caller's loop, which tells them apart
      if (!('found' in d) || !d.found || !d._source) return;
      let next: ItemDoc | undefined;
      try {
        next = group[i]!.change(d._source);
      } catch {
        return; // this item's own loop meets the problem again and reports it; the group goes on
      }
      if (!next) {
        // "Nothing to do" is only the answer of a fresh read; a remembered one is checked again.
        out[i] = known ? 'retry' : 'unchanged';
        return;
      }
      ops.push(
        {
          index: {
            _index: group[i]!.index,
            _id: group[i]!.id,
            if_seq_no: d._seq_no,
            if_primary_term: d._primary_term,
          },
        },
        next,
      );
      written.push(i);
    });
    if (!ops.length) return out;
    const r = await this.client().bulk({ operations: ops });
    r.items.forEach((item, k) => {
      const status = item.index?.status ?? 500;
      if (status >= 200 && status < 300) out[written[k]!] = 'written';
    });
    return out;
  }
}
