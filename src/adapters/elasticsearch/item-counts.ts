import { LIMITS } from '../../domain/limits';
import { NO_COUNTS, sameCounts, type ItemCounts } from '../../domain/popularity';
import type { ItemCountsRollup, RollupPass } from '../../ports/item-counts';
import { CAS_RETRIES, backoff, casUpdate } from './cas';
import { fromDoc, toDoc, type ItemDoc } from './document';
import type { EsIndices } from './indices';
import { ItemIndex, isIndexMissing, orEmpty } from './item-index';
import { unavailable } from './outage';

/** Counts with the time they were computed at (a roll-up never replaces newer ones). */
export type StoredCounts = ItemCounts & { at: number };

interface CountsDoc extends StoredCounts {
  dataset_id: string;
  item_id: string;
}

interface StateDoc {
  /** Events received from (this − OVERLAP_MS) on are new to the next pass. */
  watermark: number;
  /** The window edge the last pass applied: events older than it no longer count. */
  edge: number;
  /** When the last pass ended its work (0: never). */
  ran_at: number;
  /** A process works on a pass until then; 0 when none does. */
  claim_until: number;
}

const STATE_ID = 'state';
const NEVER: StateDoc = { watermark: 0, edge: 0, ran_at: 0, claim_until: 0 };

/**
 * Events received this long before the last pass are looked at again: a host's clock may lag
 * another's, a bulk of events stamped before the pass may be indexed after it, and an item may
 * be created just after a pass found it absent. Recounting is idempotent, so looking twice only
 * costs work: with a 30 s interval each event's item is recounted in about two passes.
 */
const OVERLAP_MS = 30_000;
/** A claimed pass that did not finish in this time (its process died) is taken by another. */
const CLAIM_MS = 30_000;
/** Items per aggregation and per write. */
const PAGE = 1000;
/** Items written before the counts existed, given their zeros per pass. */
const BACKFILL_PAGE = 500;

const countsId = (datasetId: string, itemId: string): string => `${datasetId}\u0000${itemId}`;

const chunks = <T>(xs: T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

/** The rolled-up counts of these ids of a dataset (absent: none rolled up, both 0). */
export async function storedCounts(
  indices: EsIndices,
  datasetId: string,
  ids: string[],
): Promise<Map<string, StoredCounts>> {
  const out = new Map<string, StoredCounts>();
  for (const part of chunks(ids, PAGE)) {
    // no index (the shared indices not made yet): nothing rolled up
    const docs = await orEmpty(
      async () =>
        (
          await indices.client.mget<CountsDoc>({
            index: indices.shared('item_counts'),
            ids: part.map((id) => countsId(datasetId, id)),
          })
        ).docs,
      [],
    );
    for (const d of docs) {
      if (!('found' in d) || !d.found || !d._source) continue;
      const s = d._source;
      out.set(s.item_id, { popularity: s.popularity, purchases: s.purchases, at: s.at });
    }
  }
  return out;
}

type Bucket = {
  key: string;
  clicks: { n: { value: number } };
  purchases: { n: { value: number } };
};

/**
 * The roll-up on Elasticsearch, safe in any number of processes at once. A pass is claimed
 * first (the state document, with if_seq_no), so normally one process works per interval; its
 * writes are absolute counts recomputed from the log and stamped with the pass's time, so a
 * pass repeated after a crash or done twice leaves the same state, and an older pass never
 * replaces newer counts. Items are rewritten whole with if_seq_no, like every item write (no
 * scripts): a client's or a worker's write in between makes the roll-up read again.
 */
export class EsItemCounts extends ItemIndex implements ItemCountsRollup {
  constructor(indices: EsIndices) {
    super(indices);
  }

  async rollUp(now: number): Promise<RollupPass | undefined> {
    const stateIndex = this.indices.shared('counts_rollup');
    const due = (d: StateDoc | undefined): boolean =>
      !d || (now - d.ran_at >= LIMITS.popularityPassMs && d.claim_until <= now);
    const claimUntil = now + CLAIM_MS;
    const claim = await casUpdate<StateDoc>(
      this.client,
      stateIndex,
      STATE_ID,
      (d) => (due(d) ? { ...(d ?? NEVER), claim_until: claimUntil } : undefined),
      { what: 'the popularity roll-up state' },
    );
    if (!claim.written || !claim.version) return undefined;
    const prev = claim.doc!;
    const edge = now - LIMITS.popularityWindowMs;
    const pass = await this.pass(prev, now, edge);
    await this.backfill();
    // Only if no other process took the pass over meanwhile (its claim having expired).
    await casUpdate<StateDoc>(
      this.client,
      stateIndex,
      STATE_ID,
      (d) =>
        d?.claim_until === claimUntil
          ? { watermark: now, edge, ran_at: now, claim_until: 0 }
          : undefined,
      { what: 'the popularity roll-up state', known: claim.version },
    );
    return pass;
  }

  private async pass(prev: StateDoc, now: number, edge: number): Promise<RollupPass> {
    const events = this.indices.shared('events');
    // What was logged before this pass began is searched for below.
    await this.client.indices.refresh({ index: events });
    const first = prev.ran_at === 0;
    const should: unknown[] = first
      ? [{ range: { at: { gte: edge } } }]
      : [
          { range: { received_at: { gte: prev.watermark - OVERLAP_MS } } },
          ...(prev.edge < edge ? [{ range: { at: { gte: prev.edge, lt: edge } } }] : []),
        ];
    const out: RollupPass = { recomputed: 0, changed: 0 };
    let after: Record<string, string> | undefined;
    do {
      const r = await this.client.search({
        index: events,
        size: 0,
        query: {
          bool: {
            filter: [{ exists: { field: 'qty' } }],
            should: should as never,
            minimum_should_match: 1,
          },
        },
        aggs: {
          pairs: {
            composite: {
              size: PAGE,
              sources: [
                { d: { terms: { field: 'dataset_id' } } },
                { i: { terms: { field: 'item_id' } } },
              ],
              ...(after ? { after } : {}),
            },
          },
        },
      });
      const agg = (
        r.aggregations as {
          pairs: {
            buckets: { key: { d: string; i: string } }[];
            after_key?: Record<string, string>;
          };
        }
      ).pairs;
      const byDataset = new Map<string, string[]>();
      for (const b of agg.buckets)
        byDataset.set(b.key.d, [...(byDataset.get(b.key.d) ?? []), b.key.i]);
      for (const [datasetId, ids] of byDataset) {
        out.recomputed += ids.length;
        out.changed += await this.recount(datasetId, ids, now, edge);
      }
      after = agg.buckets.length === PAGE ? agg.after_key : undefined;
    } while (after);
    return out;
  }

  /**
   * Items written before the counts existed lack the two fields: a page of them per pass gets
   * its zeros (the pass above wrote any counts they have), so ranges and stats see every item.
   */
  private async backfill(): Promise<void> {
    const r = await this.client.search<ItemDoc>({
      index: this.indices.allItems,
      size: BACKFILL_PAGE,
      seq_no_primary_term: true,
      track_total_hits: false,
      ignore_unavailable: true,
      allow_no_indices: true,
      query: {
        bool: {
          must_not: [
            { nested: { path: 'attrs', query: { term: { 'attrs.f': 'service_popularity' } } } },
          ],
        },
      },
    });
    const hits = r.hits.hits.filter((h) => h._source);
    if (!hits.length) return;
    // A conflict (the item written meanwhile, which adds the fields) needs nothing more.
    await this.client.bulk({
      operations: hits.flatMap((h) => [
        {
          index: {
            _index: h._index,
            _id: h._id,
            if_seq_no: h._seq_no,
            if_primary_term: h._primary_term,
          },
        },
        toDoc(h._source!.dataset, fromDoc(h._source!), h._source!.error ?? null, h._source),
      ]) as never[],
    });
  }

  /** Recomputes these ids' counts and writes those that changed; how many items changed. */
  private async recount(
    datasetId: string,
    ids: string[],
    now: number,
    edge: number,
  ): Promise<number> {
    const r = await this.client.search({
      index: this.indices.shared('events'),
      size: 0,
      query: {
        bool: {
          filter: [
            { term: { dataset_id: datasetId } },
            { terms: { item_id: ids } },
            { exists: { field: 'qty' } },
            { range: { at: { gte: edge } } },
          ],
        },
      },
      aggs: {
        i: {
          terms: { field: 'item_id', size: ids.length },
          aggs: {
            clicks: { filter: { term: { type: 'click' } }, aggs: { n: { sum: { field: 'qty' } } } },
            purchases: {
              filter: { term: { type: 'purchase' } },
              aggs: { n: { sum: { field: 'qty' } } },
            },
          },
        },
      },
    });
    const counted = new Map<string, ItemCounts>(ids.map((id) => [id, NO_COUNTS]));
    for (const b of (r.aggregations as { i: { buckets: Bucket[] } }).i.buckets)
      counted.set(b.key, {
        popularity: Math.round(b.clicks.n.value),
        purchases: Math.round(b.purchases.n.value),
      });
    await this.storeCounts(datasetId, counted, now);
    return this.writeItems(datasetId, counted, now);
  }

  /** The counts index, for items pushed later: absolute values, newer never replaced. */
  private async storeCounts(
    datasetId: string,
    counted: Map<string, ItemCounts>,
    now: number,
  ): Promise<void> {
    const stored = await storedCounts(this.indices, datasetId, [...counted.keys()]);
    const ops: unknown[] = [];
    for (const [id, c] of counted) {
      const s = stored.get(id);
      if (s ? s.at > now || sameCounts(s, c) : sameCounts(c, NO_COUNTS)) continue;
      ops.push(
        { index: { _index: this.indices.shared('item_counts'), _id: countsId(datasetId, id) } },
        { dataset_id: datasetId, item_id: id, ...c, at: now } satisfies CountsDoc,
      );
    }
    if (!ops.length) return;
    const r = await this.client.bulk({ operations: ops as never[] });
    if (r.errors)
      throw unavailable('the search engine refused rolled-up counts; the next pass retries');
  }

  /**
   * The items whose stored counts differ, rewritten whole with if_seq_no; a conflict (another
   * write in between) reads the item again.
   */
  private async writeItems(
    datasetId: string,
    counted: Map<string, ItemCounts>,
    now: number,
  ): Promise<number> {
    const index = this.index(datasetId);
    const differs = (d: ItemDoc | undefined, c: ItemCounts): boolean =>
      !!d && (d.counts?.at ?? 0) <= now && !sameCounts(d.counts ?? NO_COUNTS, c);
    // A cheap look at the counts alone first: most recomputed items did not change.
    let pending: string[];
    try {
      const r = await this.client.mget<ItemDoc>({
        index,
        ids: [...counted.keys()],
        _source_includes: ['counts'],
        // not realtime: the rewrite below reads each item realtime and compares again
        realtime: false,
      });
      pending = r.docs
        .filter(
          (d) =>
            'found' in d && d.found && differs({ ...d._source } as ItemDoc, counted.get(d._id)!),
        )
        .map((d) => d._id);
    } catch (e) {
      if (isIndexMissing(e)) return 0;
      throw e;
    }
    let written = 0;
    for (let attempt = 0; pending.length && attempt < CAS_RETRIES; attempt++) {
      if (attempt) await backoff(attempt);
      const { hits } = await this.mget(datasetId, pending);
      const ops: unknown[] = [];
      const planned: string[] = [];
      for (const h of hits) {
        const c = counted.get(h._id)!;
        if (!differs(h._source, c)) continue;
        const src = h._source!;
        const item = { ...fromDoc(src), counts: { ...c, at: now } };
        ops.push(
          {
            index: {
              _index: index,
              _id: h._id,
              if_seq_no: h._seq_no,
              if_primary_term: h._primary_term,
            },
          },
          toDoc(datasetId, item, src.error ?? null, src),
        );
        planned.push(h._id);
      }
      if (!ops.length) break;
      const r = await this.client.bulk({ operations: ops as never[] });
      const again: string[] = [];
      r.items.forEach((it, i) => {
        const res = it.index;
        if (!res?.error) written++;
        else if (res.status === 409) again.push(planned[i]!);
        // a deleted dataset or item: nothing to count
      });
      pending = again;
    }
    return written;
  }
}
