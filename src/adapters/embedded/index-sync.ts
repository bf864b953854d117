import { changedSince, changeHead } from './change-log';
import { stmt, type Db } from './db';
import {
  READ_SQL,
  readInThread,
  type IndexChunk,
  type ItemTuple,
  type TermTuple,
  type ValueTuple,
} from './index-read';
import { DatasetIndex, type ValueRow } from './memory-index';

/** Datasets whose index is kept at once (least recently used goes first). */
const MAX_DATASETS = 8;

/** Items read per round trip while building. */
const CHUNK = 2000;
/**
 * Items per chunk of a reading thread: the main thread indexes one between turns of the event
 * loop, so a chunk is kept to a few tens of milliseconds of work.
 */
const THREAD_CHUNK = 500;

/** Reads the items in `items` (sorted by pk) with their values and words into the index. */
function load(db: Db, ix: DatasetIndex, items: ItemTuple[]): void {
  for (let k = 0; k < items.length; k += CHUNK) {
    const part = items.slice(k, k + CHUNK);
    const lo = part[0]![0];
    const hi = part[part.length - 1]![0];
    // the reading thread's statements (index-read.ts), so each query has one form
    const json = (sql: string) => (stmt(db, sql).raw().get(lo, hi) as [string])[0];
    const values = JSON.parse(json(READ_SQL.values)) as ValueTuple[];
    const terms = JSON.parse(json(READ_SQL.terms)) as TermTuple[];
    merge(ix, { items: part, values, terms });
  }
}

/** Puts a chunk's items into the index, each with its values and words (all in pk order). */
function merge(ix: DatasetIndex, { items, values, terms }: IndexChunk): void {
  let v = 0;
  let t = 0;
  for (const [pk, id, state, created, updated] of items) {
    while (v < values.length && values[v]![0] < pk) v++;
    const rows: ValueRow[] = [];
    for (; v < values.length && values[v]![0] === pk; v++) {
      const [, field, isArray, vtype, sval, nval] = values[v]!;
      rows.push({ field, isArray, vtype, sval, nval });
    }
    while (t < terms.length && terms[t]![0] < pk) t++;
    const words: string[] = [];
    for (; t < terms.length && terms[t]![0] === pk; t++) words.push(terms[t]![1]);
    ix.put(
      pk,
      {
        id,
        processed: state === 'processed',
        pending: state === 'pending',
        createdAt: created,
        updatedAt: updated,
      },
      rows,
      words,
    );
  }
}

export interface BuildReport {
  datasetId: string;
  items: number;
  ms: number;
  bytes?: number;
}

/** A dataset of up to this many items is built at once when first read (a few ms). */
const BUILD_NOW_MAX = CHUNK;

/**
 * The in-memory indexes of one SQLite file, one per dataset, built on first use and caught up
 * with the change log (change-log.ts) before every read: a write committed by this process or
 * any other is visible to the next query, and when nothing changed the check is one point read.
 * A large dataset is built in the background from chunks a thread reads (100,000 items take
 * seconds, and better-sqlite3 is synchronous: built at once, that process would answer nothing
 * else meanwhile); queries on it wait for the build (`whenReady`), queries on other datasets do
 * not.
 */
export class MemoryIndexes {
  private readonly indexes = new Map<string, DatasetIndex>();
  /** Background builds under way; each resolves to its failure, if it failed. */
  private readonly building = new Map<string, Promise<unknown>>();
  /** The last full build, for measurements and logs. */
  lastBuild: BuildReport | undefined;
  /** Told of each background build as it starts (the engine loads the vectors meanwhile). */
  private readonly buildStarts: Array<(datasetId: string) => void> = [];

  private static readonly byDb = new WeakMap<Db, MemoryIndexes>();

  /** One set of indexes per connection: the engine and the content store share them. */
  static of(db: Db): MemoryIndexes {
    let m = MemoryIndexes.byDb.get(db);
    if (!m) MemoryIndexes.byDb.set(db, (m = new MemoryIndexes(db)));
    return m;
  }

  private constructor(private readonly db: Db) {}

  /** Calls `listener` with the dataset of each background build as it starts. */
  onBuildStart(listener: (datasetId: string) => void): void {
    this.buildStarts.push(listener);
  }

  /** The dataset's index caught up, if it is in memory already (never builds one). */
  peek(datasetId: string): DatasetIndex | undefined {
    return this.indexes.has(datasetId) ? this.get(datasetId) : undefined;
  }

  /**
   * Catches the dataset's index up with the change log if it is in memory and not being built,
   * never building one: a background writer that changed a few items calls it between its
   * slices, so no query pays for a whole pass's items at once. Its place among the recently
   * used stays.
   */
  catchUp(datasetId: string): void {
    if (!this.indexes.has(datasetId) || this.building.has(datasetId)) return;
    const ix = this.db.transaction(() => this.current(datasetId, false))();
    if (ix) this.indexes.set(datasetId, ix);
  }

  /** The dataset's index as of now, built at once if need be (tests and measurements). */
  get(datasetId: string): DatasetIndex {
    return this.keep(datasetId, this.db.transaction(() => this.current(datasetId, true))()!);
  }

  /** The dataset's index as of now; a large one is built in the background first. */
  async whenReady(datasetId: string): Promise<DatasetIndex> {
    for (;;) {
      const ix = this.ready(datasetId);
      if (ix) return ix;
      const failure = await this.building.get(datasetId);
      // the store was unavailable: this query fails, the next one starts a new build
      if (failure !== undefined) throw failure;
    }
  }

  /**
   * The dataset's index as of now, or undefined while a large one is being built in the
   * background (started here when it is not).
   */
  private ready(datasetId: string): DatasetIndex | undefined {
    if (this.building.has(datasetId)) return undefined;
    const ix = this.db.transaction(() => this.current(datasetId, false))();
    if (ix) return this.keep(datasetId, ix);
    this.buildInBackground(datasetId);
    return undefined;
  }

  private keep(datasetId: string, ix: DatasetIndex): DatasetIndex {
    this.indexes.delete(datasetId);
    this.indexes.set(datasetId, ix);
    while (this.indexes.size > MAX_DATASETS) this.indexes.delete(this.indexes.keys().next().value!);
    return ix;
  }

  /** Undefined when a full build is needed and `now` is false (and the dataset is large). */
  private current(datasetId: string, now: boolean): DatasetIndex | undefined {
    const head = changeHead(this.db, datasetId);
    const ix = this.indexes.get(datasetId);
    // a database in memory cannot be opened by a reading thread
    const build = () =>
      now || this.db.memory || this.itemCount(datasetId) <= BUILD_NOW_MAX
        ? this.build(datasetId, head.seq)
        : undefined;
    if (!ix || ix.seen < head.floor) return build();
    if (ix.seen === head.seq) return ix;
    const pks = changedSince(this.db, datasetId, ix.seen);
    // Past a quarter of the dataset, reading it all in order is faster than item by item.
    if (pks.length > 5000 && pks.length > ix.slotOfPk.size / 4) return build();
    const one = stmt(
      this.db,
      'SELECT pk, id, state, created_at, updated_at FROM items WHERE pk = ? AND dataset_id = ?',
    ).raw();
    for (const pk of pks) {
      const item = one.get(pk, datasetId) as ItemTuple | undefined;
      if (item) load(this.db, ix, [item]);
      else ix.remove(pk);
    }
    ix.seen = head.seq;
    return ix;
  }

  private itemCount(datasetId: string): number {
    return (
      stmt(this.db, 'SELECT COUNT(*) AS n FROM items WHERE dataset_id = ?').get(datasetId) as {
        n: number;
      }
    ).n;
  }

  /**
   * Builds the index from chunks a thread reads (index-read.ts), so the SQLite reads run on
   * another core and the event loop turns between chunks. Rows read in later chunks may be
   * newer than the head noted at the start; every item written after that head is stamped
   * after it, so the first read after the build re-reads each of them (index `seen` = that
   * head) and the index ends as current as one built at once.
   */
  private buildInBackground(datasetId: string): void {
    const run = async (): Promise<void> => {
      const t0 = performance.now();
      const ix = new DatasetIndex();
      const seq = changeHead(this.db, datasetId).seq;
      let items = 0;
      for await (const chunk of readInThread({
        file: this.db.name,
        datasetId,
        chunk: THREAD_CHUNK,
      })) {
        // a turn of the event loop per chunk: chunks queued by the thread would otherwise be
        // merged one after another in one stretch
        await new Promise((r) => setImmediate(r));
        merge(ix, chunk);
        items += chunk.items.length;
      }
      ix.seen = seq;
      this.keep(datasetId, ix);
      this.lastBuild = { datasetId, items, ms: performance.now() - t0 };
    };
    const done = run()
      .then(
        () => undefined,
        (e: unknown) => e ?? new Error('index build failed'),
      )
      .finally(() => this.building.delete(datasetId));
    this.building.set(datasetId, done);
    for (const listener of this.buildStarts) listener(datasetId);
  }

  /** Resolves when the dataset's background build (if any) has finished (tests). */
  async settled(datasetId: string): Promise<void> {
    await this.building.get(datasetId);
  }

  private build(datasetId: string, seq: number): DatasetIndex {
    const t0 = performance.now();
    const ix = new DatasetIndex();
    const items = stmt(
      this.db,
      'SELECT pk, id, state, created_at, updated_at FROM items WHERE dataset_id = ? ORDER BY pk',
    )
      .raw()
      .all(datasetId) as ItemTuple[];
    load(this.db, ix, items);
    ix.seen = seq;
    this.lastBuild = { datasetId, items: items.length, ms: performance.now() - t0 };
    return ix;
  }
}
