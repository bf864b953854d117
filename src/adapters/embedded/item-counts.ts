import { randomUUID } from 'node:crypto';
import { LIMITS } from '../../domain/limits';
import { countFields, sameCounts, type ItemCounts } from '../../domain/popularity';
import type { ItemCountsRollup, RollupPass } from '../../ports/item-counts';
import { ChangeLog } from './change-log';
import { type Db, stmt } from './db';
import { MemoryIndexes } from './index-sync';

/** Where the roll-up is (meta table): the last event id and window edge it has counted. */
interface RollupState {
  /** Events with a larger id are new to the roll-up. */
  event: number;
  /** Events before this time no longer count (the last pass's edge of the window). */
  edge: number;
  /** When the last pass started (claimed). */
  at: number;
  /** The pass that claimed the interval: only it writes counts or moves the watermark. */
  pass?: string;
}

const STATE_KEY = 'counts_rollup';

/**
 * New events counted per watermark move: the ids to recount are held in memory this many events
 * at a time, and a pass that stops mid-backlog keeps what it finished.
 */
const EVENTS_PER_STEP = 20_000;
/** Events read per turn of the event loop while finding the items to recount. */
const EVENTS_PER_READ = 2_000;
/**
 * A slice: items recounted and written in one transaction (at most this many, for at most
 * SLICE_MS, at least one), which then commits and yields the event loop. better-sqlite3 is
 * synchronous, and one transaction for a whole pass (about 2,000 items at 100 events/s) held the
 * event loop every search shares for a few hundred ms; a commit's cost grows with the pages its
 * items dirtied (about six each), and this process's indexes then read the slice's items too.
 */
const ITEMS_PER_SLICE = 50;
const SLICE_MS = 5;

type Pair = { dataset_id: string; item_id: string };

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * The roll-up on the embedded SQLite file. Event ids grow in commit order (SQLite has one
 * writer at a time), so "new since the last pass" is an id watermark. A pass first claims the
 * interval in one IMMEDIATE transaction (processes sharing the file serialise on it, and a second
 * one finds no pass due), then recounts the touched items in short IMMEDIATE transactions,
 * yielding the event loop between them, each writing absolute counts and stopping if another
 * pass has claimed since; the watermark moves only once every item of its events is written. A
 * pass that dies midway leaves the watermark where it was: the next one counts those items again,
 * to the same absolute values.
 */
export class SqliteItemCounts implements ItemCountsRollup {
  private readonly changes: ChangeLog;

  constructor(private readonly db: Db) {
    this.changes = new ChangeLog(db);
  }

  async rollUp(now: number): Promise<RollupPass | undefined> {
    const pass = randomUUID();
    const claimed = this.db.transaction(() => this.claim(now, pass)).immediate();
    if (!claimed) return undefined;
    const edge = now - LIMITS.popularityWindowMs;
    const out: RollupPass = { recomputed: 0, changed: 0 };
    let from = claimed.event;
    // Items whose events left the window since the last pass (the first pass: none counted yet).
    let edgeFrom = claimed.edgeFrom;
    for (let first = true; ; first = false) {
      const pairs = new Map<string, Pair>();
      const add = (d: string, i: string) =>
        pairs.set(`${d}\u0000${i}`, { dataset_id: d, item_id: i });
      const { last, full } = await this.newEvents(from, add);
      if (edgeFrom !== undefined) await this.leaving(edgeFrom, edge, add);
      const list = [...pairs.values()];
      for (let k = 0; k < list.length;) {
        await nextTurn();
        const slice = this.unsynced(() =>
          this.db.transaction(() => this.slice(list, k, edge, pass)).immediate(),
        );
        if (!slice) return out; // another pass claimed the installation: it recounts these
        out.recomputed += slice.next - k;
        out.changed += slice.changed;
        k = slice.next;
        if (slice.datasets.length) {
          await nextTurn();
          // this process's indexes take the slice now, so a search finds them current
          for (const d of slice.datasets) MemoryIndexes.of(this.db).catchUp(d);
        }
      }
      const moved = this.db
        .transaction(() => this.advance(pass, last, first ? edge : undefined))
        .immediate();
      if (!moved || !full) return out;
      from = last;
      edgeFrom = undefined;
    }
  }

  /**
   * Claims the pass at `now` if none ran within popularityPassMs: the state gets this pass and
   * its time; the watermark and edge stay until the pass has written what they cover.
   */
  private claim(now: number, pass: string): { event: number; edgeFrom?: number } | undefined {
    const state = this.state();
    if (state && now - state.at < LIMITS.popularityPassMs) return undefined;
    const edge = now - LIMITS.popularityWindowMs;
    this.save({ event: state?.event ?? 0, edge: state?.edge ?? edge, at: now, pass });
    return {
      event: state?.event ?? 0,
      ...(state && state.edge < edge ? { edgeFrom: state.edge } : {}),
    };
  }

  /** Adds the items of up to EVENTS_PER_STEP counted events after `from`, a read per turn. */
  private async newEvents(
    from: number,
    add: (d: string, i: string) => void,
  ): Promise<{ last: number; full: boolean }> {
    const read = stmt(
      this.db,
      `SELECT id, dataset_id, item_id FROM events WHERE id > ? AND qty IS NOT NULL
         ORDER BY id LIMIT ?`,
    ).raw();
    let last = from;
    for (let n = 0; n < EVENTS_PER_STEP;) {
      await nextTurn();
      const want = Math.min(EVENTS_PER_READ, EVENTS_PER_STEP - n);
      const rows = read.all(last, want) as Array<[number, string, string]>;
      for (const r of rows) add(r[1], r[2]);
      if (rows.length) last = rows[rows.length - 1]![0];
      n += rows.length;
      if (rows.length < want) return { last, full: false };
    }
    return { last, full: true };
  }

  /** Adds the items of the counted events with `from <= at < to`, a read per turn. */
  private async leaving(from: number, to: number, add: (d: string, i: string) => void) {
    const read = stmt(
      this.db,
      `SELECT id, at, dataset_id, item_id FROM events INDEXED BY events_counted_at
         WHERE qty IS NOT NULL AND (at, id) > (?, ?) AND at < ? ORDER BY at, id LIMIT ?`,
    ).raw();
    // keyset paging on (at, id): (at, id) > (from, 0) is at >= from, ids being positive
    let after: [number, number] = [from, 0];
    for (;;) {
      await nextTurn();
      const rows = read.all(after[0], after[1], to, EVENTS_PER_READ) as Array<
        [number, number, string, string]
      >;
      for (const r of rows) add(r[2], r[3]);
      if (rows.length < EVENTS_PER_READ) return;
      const [id, at] = rows[rows.length - 1]!;
      after = [at, id];
    }
  }

  /**
   * Recounts a slice of `list` from `k` on in one transaction, writing the changed
   * counts and stamping the change log; undefined (nothing written) when another pass has
   * claimed since this one.
   */
  private slice(
    list: Pair[],
    k: number,
    edge: number,
    pass: string,
  ): { next: number; changed: number; datasets: string[] } | undefined {
    if (this.state()?.pass !== pass) return undefined;
    const count = stmt(
      this.db,
      `SELECT COALESCE(SUM(CASE WHEN type = 'click' THEN qty END), 0) AS popularity,
              COALESCE(SUM(CASE WHEN type = 'purchase' THEN qty END), 0) AS purchases
         FROM events INDEXED BY events_counted_item
         WHERE dataset_id = ? AND item_id = ? AND qty IS NOT NULL AND at >= ?`,
    );
    const stored = stmt(
      this.db,
      'SELECT popularity, purchases FROM item_counts WHERE dataset_id = ? AND item_id = ?',
    );
    const t0 = performance.now();
    let changed = 0;
    const touched = new Map<string, number[]>();
    let i = k;
    do {
      const p = list[i++]!;
      const c = count.get(p.dataset_id, p.item_id, edge) as ItemCounts;
      const before = stored.get(p.dataset_id, p.item_id) as ItemCounts | undefined;
      if (sameCounts(c, before ?? { popularity: 0, purchases: 0 })) continue;
      const pk = this.write(p, c);
      if (pk === undefined) continue;
      changed++;
      let pks = touched.get(p.dataset_id);
      if (!pks) touched.set(p.dataset_id, (pks = []));
      pks.push(pk);
    } while (i < list.length && i - k < ITEMS_PER_SLICE && performance.now() - t0 < SLICE_MS);
    for (const [datasetId, pks] of touched) this.changes.stamp(datasetId, pks, false);
    return { next: i, changed, datasets: [...touched.keys()] };
  }

  /** Moves the watermark (and the edge, after the pass's first step) if the claim is still ours. */
  private advance(pass: string, event: number, edge: number | undefined): boolean {
    const state = this.state();
    if (state?.pass !== pass) return false;
    this.save({ ...state, event, edge: edge ?? state.edge });
    return true;
  }

  /**
   * Runs a slice's transaction without its own fsync (WAL, synchronous NORMAL; the connection's
   * setting is back before any other code runs on it). Nothing is lost that matters: the
   * watermark's commit, at FULL, syncs the write-ahead log up to it, slices included, and a slice
   * a crash loses is recounted by the next pass because the watermark had not moved past it. Each
   * commit's fsync otherwise held the event loop a few ms (tens on a busy disk), once per slice.
   */
  private unsynced<T>(run: () => T): T {
    const was = this.db.pragma('synchronous', { simple: true }) as number;
    if (was <= 1) return run();
    this.db.pragma('synchronous = NORMAL');
    try {
      return run();
    } finally {
      this.db.pragma(`synchronous = ${was}`);
    }
  }

  private state(): RollupState | undefined {
    const raw = stmt(this.db, 'SELECT value FROM meta WHERE key = ?').pluck().get(STATE_KEY) as
      string | undefined;
    return raw ? (JSON.parse(raw) as RollupState) : undefined;
  }

  private save(state: RollupState): void {
    stmt(this.db, 'INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(
      STATE_KEY,
      JSON.stringify(state),
    );
  }

  /** Stores an id's counts; the pk of its item when the dataset has one. */
  private write(p: Pair, c: ItemCounts): number | undefined {
    if (c.popularity === 0 && c.purchases === 0)
      stmt(this.db, 'DELETE FROM item_counts WHERE dataset_id = ? AND item_id = ?').run(
        p.dataset_id,
        p.item_id,
      );
    else
      stmt(
        this.db,
        'INSERT OR REPLACE INTO item_counts (dataset_id, item_id, popularity, purchases) VALUES (?, ?, ?, ?)',
      ).run(p.dataset_id, p.item_id, c.popularity, c.purchases);
    const pk = stmt(
      this.db,
      'UPDATE items SET popularity = ?, purchases = ? WHERE dataset_id = ? AND id = ? RETURNING pk',
    )
      .pluck()
      .get(c.popularity, c.purchases, p.dataset_id, p.item_id) as number | undefined;
    if (pk === undefined) return undefined;
    const setValue = stmt(
      this.db,
      `UPDATE item_values SET nval = ? WHERE item_pk = ? AND scope = 'gen' AND field = ?`,
    );
    for (const [field, n] of Object.entries(countFields(c))) setValue.run(n, pk, field);
    return pk;
  }
}
