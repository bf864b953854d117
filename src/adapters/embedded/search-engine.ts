import type { FiguresSpec, Figures } from '../../domain/figures';
import type { GroupedPage } from '../../domain/group';
import type { Scalar } from '../../domain/metadata';
import type { StoredItem } from '../../domain/item';
import type { SimilaritySettings } from '../../domain/tuning/settings';
import type { Condition } from '../../query/ast';
import type {
  Facets,
  FoundNeighbours,
  GroupedSearchRequest,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  RankedSet,
  SimilarRequest,
  TuningPage,
} from '../../ports/search-engine';
import { count, has, slotsOf } from './bitset';
import { stmt, type Db } from './db';
import { indexFigures, indexFacets } from './index-figures';
import { groupCountsOf, groupPage } from './index-groups';
import { matching } from './index-conditions';
import { pageOf } from './index-sort';
import { MemoryIndexes } from './index-sync';
import { NearIndex } from './near-index';
import { slicer } from './slicer';
import { nearPairs } from './near-pairs';
import type { DatasetIndex } from './memory-index';
import { VectorCache, topK, type Matrix } from './vector-cache';
import { excludedRows, itemsByPk, scoredHits } from './vector-hits';

/** Below this many vectors the duplicate pass scans them all; above, calls past EXACT_CALLS use a NearIndex. */
const NEAR_INDEX_ROWS = 5000;
const EXACT_CALLS = 2;
/**
 * A near index unused this long is let go: it holds its own copy of the codes (142 MB at
 * 100,000 items at 1,420-d) that only a running pass needs.
 */
const NEAR_INDEX_IDLE_MS = 120_000;

/** The dataset's vectors changed while a near index was being built over them. */
class OutdatedVectors extends Error {}

/** No rows to skip: exclusions are left out of the row list already. */
const NO_ROWS: Set<number> = new Set();

/**
 * The embedded engine: SQLite keeps the data, and queries are answered from an in-memory index
 * per dataset (memory-index.ts), caught up with every committed write before each query
 * (index-sync.ts). Filters are sets of item slots (index-conditions.ts), pages come from a
 * per-field sort order (index-sort.ts), figures from per-value counts (index-figures.ts), and
 * similarity scans the contiguous vector matrix with the filter applied inside the scan.
 */
export class EmbeddedSearchEngine implements SearchEngine {
  private readonly indexes: MemoryIndexes;
  private readonly vectors: VectorCache;
  private readonly nearIndexes = new WeakMap<
    Matrix,
    { version: number; calls: number; index?: Promise<NearIndex>; idle?: NodeJS.Timeout }
  >();
  private rowScratch = new Int32Array(0);
  private readonly rowSlots = new WeakMap<
    Matrix,
    { ix: DatasetIndex; slotVersion: number; slots: Int32Array }
  >();

  constructor(private readonly db: Db) {
    this.indexes = MemoryIndexes.of(db);
    this.vectors = new VectorCache(db);
    // weakly: the indexes are the connection's, shared by every engine made on it
    const engine = new WeakRef(this);
    this.indexes.onBuildStart((datasetId) => engine.deref()?.prefetchVectors(datasetId));
  }

  /**
   * A large dataset's first query builds its index; its vectors are loaded on a thread
   * meanwhile, so the first `similar` need not wait for both in turn. Not for a dataset
   * ranking by a tuned projection (contract §20): its requests need the projected rows too,
   * loaded with the projection they ask for.
   */
  private prefetchVectors(datasetId: string): void {
    try {
      const d = stmt(this.db, 'SELECT embedder, similarity FROM datasets WHERE id = ?').get(
        datasetId,
      ) as { embedder: string | null; similarity: string | null } | undefined;
      if (!d?.embedder) return;
      if (d.similarity && (JSON.parse(d.similarity) as SimilaritySettings).state === 'active')
        return;
      this.vectors.prefetch(datasetId, d.embedder);
    } catch {
      // only a head start: the query that started the build must not fail for it, and the
      // request that needs the vectors loads them and meets the failure itself
    }
  }

  /** The index of a dataset as of now (its size and build time, for tests and measurements). */
  index(datasetId: string): DatasetIndex {
    return this.indexes.get(datasetId);
  }

  get lastBuild() {
    return this.indexes.lastBuild;
  }

  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }> {
    return this.withIndex(datasetId, (ix) => {
      const m = matching(ix, req.conditions);
      const total = count(m);
      const pks = pageOf(ix, m, total, req.sort, req.offset, req.limit).map((s) => ix.pks[s]!);
      const items = itemsByPk(this.db, pks);
      return { items: pks.flatMap((pk) => items.get(pk) ?? []), total };
    });
  }

  searchGroups(datasetId: string, req: GroupedSearchRequest): Promise<GroupedPage> {
    return this.withIndex(datasetId, (ix) => {
      const page = groupPage(ix, matching(ix, req.conditions), req);
      const items = itemsByPk(
        this.db,
        page.groups.flatMap((g) => g.slots.map((s) => ix.pks[s]!)),
      );
      return {
        ...page,
        groups: page.groups.map(({ slots, ...g }) => ({
          ...g,
          items: slots.flatMap((s) => items.get(ix.pks[s]!) ?? []),
        })),
      };
    });
  }

  groupCounts(
    datasetId: string,
    conditions: Condition[],
    field: string,
    values: Scalar[],
  ): Promise<number[]> {
    return this.withIndex(datasetId, (ix) =>
      groupCountsOf(ix, matching(ix, conditions), field, values),
    );
  }

  /** Per vector-matrix row, the item's slot in the index (-1: unknown to it). */
  private slotsOfRows(ix: DatasetIndex, m: Matrix): Int32Array {
    // Keyed by the matrix itself: a reloaded matrix may order its rows differently.
    const had = this.rowSlots.get(m);
    if (had && had.ix === ix && had.slotVersion === ix.slotVersion) return had.slots;
    const slots = Int32Array.from(m.pks, (pk) => ix.slotOfPk.get(pk) ?? -1);
    this.rowSlots.set(m, { ix, slotVersion: ix.slotVersion, slots });
    return slots;
  }

  /**
   * The matrix rows a similarity request ranks: matching items' vectors, exclusions skipped.
   * In the engine's one reused array (`rowScratch`), valid until the next call: a request
   * ranks them before it yields, and a fresh list per request (a million rows unfiltered)
   * was garbage that grew the heap by a gigabyte over a hundred requests.
   */
  private rankedRows(ix: DatasetIndex, datasetId: string, set: RankedSet, m: Matrix) {
    const slots = this.slotsOfRows(ix, m);
    const filter = matching(ix, set.conditions);
    const skip = excludedRows(this.db, datasetId, m, set.excludeIds);
    if (this.rowScratch.length < slots.length) this.rowScratch = new Int32Array(slots.length);
    const rows = this.rowScratch;
    let n = 0;
    for (let r = 0; r < slots.length; r++) {
      const s = slots[r]!;
      if (s >= 0 && has(filter, s) && !skip.has(r)) rows[n++] = r;
    }
    return { m, rows: rows.subarray(0, n) };
  }

  /**
   * Always exact (so `exact` and `pageSize` change nothing): every vector of a matching item is
   * compared, the filter a set of slots tested row by row over the contiguous matrix
   * (vector-cache.ts).
   */
  async similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    if (req.limit <= 0) return [];
    const t = req.tuning;
    const matrix = await this.vectors.ready(datasetId, req.embedder, t);
    return this.withIndex(datasetId, (ix) => {
      const { m, rows } = this.rankedRows(ix, datasetId, req, matrix);
      if (!rows.length) return [];
      // Equal scores in id order, as on Elasticsearch: every `limit` then cuts one ranking, and
      // several vectors' lists fuse consistently (bestOf).
      const query = Float32Array.from(req.vector);
      const top = topK(m, query, req.limit, rows, NO_ROWS, true, t && { weight: t.weight });
      const hits = scoredHits(this.db, m, top, req.includeVectors).sort(
        (a, b) => b.score - a.score || (a.item.id < b.item.id ? -1 : a.item.id > b.item.id ? 1 : 0),
      );
      return hits.slice(req.offset ?? 0, req.limit);
    });
  }

  async neighbours(
    datasetId: string,
    embedder: string,
    ids: readonly string[],
    maxDistance: number,
    k: number,
  ): Promise<FoundNeighbours[]> {
    const matrix = await this.vectors.ready(datasetId, embedder);
    // a copy of the rows: the pass uses them across turns of the event loop
    const { ix, m, rows } = await this.withIndex(datasetId, (ix) => {
      const ranked = this.rankedRows(
        ix,
        datasetId,
        { embedder, conditions: [], excludeIds: [] },
        matrix,
      );
      return { ix, m: ranked.m, rows: Array.from(ranked.rows) };
    });
    // The matrix is one vector version's own, so it stays whole while the index builds and the
    // scan runs in slices; distances come from the vectors stored when each pair is scored.
    const current = () => this.vectors.version(datasetId) === m.version;
    const index = await this.nearIndex(ix, m, rows, current);
    return nearPairs(this.db, datasetId, m, rows, ids, maxDistance, k, index);
  }

  /**
   * The candidate index for a long pass over a large dataset: the first calls against a set of
   * vectors scan exactly (a few new items cost less than building the index), later ones share
   * one index, built in slices, until any item changes or no pass has used it for
   * NEAR_INDEX_IDLE_MS. A build whose vectors change meanwhile stops (the next call starts on
   * the new ones) rather than hold two matrices.
   */
  private async nearIndex(
    ix: DatasetIndex,
    m: Matrix,
    rows: number[],
    current: () => boolean,
  ): Promise<NearIndex | undefined> {
    if (rows.length < NEAR_INDEX_ROWS) return undefined;
    const had = this.nearIndexes.get(m);
    const entry = had && had.version === ix.version ? had : { version: ix.version, calls: 0 };
    this.nearIndexes.set(m, entry);
    if (had && had !== entry) clearTimeout(had.idle);
    if (entry.idle) entry.idle.refresh();
    else {
      // weakly: the timer must not keep a replaced matrix's index alive
      const ref = new WeakRef(entry);
      entry.idle = setTimeout(() => {
        const e = ref.deref();
        if (!e) return;
        // the next pass starts with exact scans again, as after a change
        delete e.index;
        e.calls = 0;
        e.idle = undefined;
      }, NEAR_INDEX_IDLE_MS).unref();
    }
    if (++entry.calls <= EXACT_CALLS) return undefined;
    if (!entry.index) {
      const slice = slicer();
      const built = NearIndex.build(m, rows, () => {
        if (!current()) throw new OutdatedVectors();
        return slice();
      });
      entry.index = built;
      built.catch(() => {
        if (entry.index === built) delete entry.index;
      });
    }
    return entry.index.catch((e: unknown) => {
      if (e instanceof OutdatedVectors) return undefined;
      throw e;
    });
  }

  /** Projections are made when vectors are loaded (VectorCache): nothing is stored. */
  async applyTuning(): Promise<TuningPage> {
    return { changed: 0 };
  }

  /** Vectors live in memory, rebuilt when loaded: nothing is left to merge. */
  async compact(): Promise<boolean> {
    return true;
  }

  async rankedCount(datasetId: string, set: RankedSet): Promise<number> {
    const m = await this.vectors.ready(datasetId, set.embedder);
    return this.withIndex(datasetId, (ix) => this.rankedRows(ix, datasetId, set, m).rows.length);
  }

  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return this.withIndex(datasetId, (ix) => {
      const m = matching(ix, conditions);
      const picked = Array.from(slotsOf(m), (s) => {
        const pk = ix.pks[s]!;
        return { pk, key: sampleKey(pk, seed) };
      })
        .sort((a, b) => a.key - b.key)
        .slice(0, Math.max(0, limit))
        .map((p) => p.pk);
      const items = itemsByPk(this.db, picked);
      return picked.flatMap((pk) => items.get(pk) ?? []);
    });
  }

  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    return this.withIndex(datasetId, (ix) => indexFacets(ix, conditions, fields));
  }

  figures(datasetId: string, conditions: Condition[], spec: FiguresSpec): Promise<Figures> {
    return this.withIndex(datasetId, (ix) => indexFigures(ix, conditions, spec));
  }

  /** Answers from the dataset's index, caught up with every committed write. */
  private async withIndex<T>(datasetId: string, run: (ix: DatasetIndex) => T): Promise<T> {
    return run(await this.indexes.whenReady(datasetId));
  }

  /** Resolves when a background build of the dataset's index has finished (tests, measurements). */
  indexSettled(datasetId: string): Promise<void> {
    return this.indexes.settled(datasetId);
  }
}

/**
 * explore's random order: (pk XOR seed) × 2654435761 mod 2^32, ascending. Reproducible for a
 * seed; an odd multiplier maps distinct 32-bit values to distinct keys, so ties need pks past
 * 2^32. Math.imul gives the exact low 32 bits while pk and seed fit in 31 bits.
 */
function sampleKey(pk: number, seed: number): number {
  if (pk >= 0 && pk < 2 ** 31 && seed >= 0 && seed < 2 ** 31)
    return Math.imul(pk ^ seed, 2654435761 | 0) >>> 0;
  const m = 4294967296n;
  return Number(((((BigInt(pk) ^ BigInt(seed)) * 2654435761n) % m) + m) % m);
}
