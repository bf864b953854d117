import { LIMITS } from '../../domain/limits';
import { countFields, sameCounts, type ItemCounts } from '../../domain/popularity';
import type { ItemCountsRollup, RollupPass } from '../../ports/item-counts';
import { ChangeLog } from './change-log';
import { type Db, stmt } from './db';

/** Where the roll-up is (meta table): the last event id and window edge it has counted. */
interface RollupState {
  /** Events with a larger id are new to the roll-up. */
  event: number;
  /** Events before this time no longer count (the last pass's edge of the window). */
  edge: number;
  /** When the last pass ran. */
  at: number;
}

const STATE_KEY = 'counts_rollup';

/** New events read per transaction, so a backlog never holds the write lock for long. */
const EVENTS_PER_STEP = 20_000;

type Pair = { dataset_id: string; item_id: string };

/**
 * The roll-up on the embedded SQLite file. Event ids grow in commit order (SQLite has one
 * writer at a time), so "new since the last pass" is an id watermark, and every step is one
 * IMMEDIATE transaction that reads the log, writes the changed counts and moves the watermark
 * together: processes sharing the file serialise on it, and a second one finds nothing to do.
 */
export class SqliteItemCounts implements ItemCountsRollup {
  private readonly changes: ChangeLog;

  constructor(private readonly db: Db) {
    this.changes = new ChangeLog(db);
  }

  async rollUp(now: number): Promise<RollupPass | undefined> {
    const out: RollupPass = { recomputed: 0, changed: 0 };
    for (let first = true; ; first = false) {
      const step = this.db.transaction(() => this.step(now, first)).immediate();
      if (!step) return first ? undefined : out;
      out.recomputed += step.recomputed;
      out.changed += step.changed;
      if (!step.more) return out;
    }
  }

  private step(now: number, first: boolean): (RollupPass & { more: boolean }) | undefined {
    const raw = stmt(this.db, 'SELECT value FROM meta WHERE key = ?').pluck().get(STATE_KEY) as
      string | undefined;
    const state = raw ? (JSON.parse(raw) as RollupState) : undefined;
    if (first && state && now - state.at < LIMITS.popularityPassMs) return undefined;
    const edge = now - LIMITS.popularityWindowMs;
    const pairs = new Map<string, Pair>();
    const add = (rows: Pair[]) => {
      for (const r of rows) pairs.set(`${r.dataset_id}\u0000${r.item_id}`, r);
    };
    const last = stmt(
      this.db,
      `SELECT MAX(id) FROM (SELECT id FROM events WHERE id > ? AND qty IS NOT NULL
         ORDER BY id LIMIT ${EVENTS_PER_STEP})`,
    )
      .pluck()
      .get(state?.event ?? 0) as number | null;
    if (last !== null)
      add(
        stmt(
          this.db,
          `SELECT DISTINCT dataset_id, item_id FROM events
             WHERE id > ? AND id <= ? AND qty IS NOT NULL`,
        ).all(state?.event ?? 0, last) as Pair[],
      );
    // Items whose events left the window since the last pass (the first pass: none counted yet).
    if (first && state && state.edge < edge)
      add(
        stmt(
          this.db,
          `SELECT DISTINCT dataset_id, item_id FROM events INDEXED BY events_counted_at
             WHERE qty IS NOT NULL AND at >= ? AND at < ?`,
        ).all(state.edge, edge) as Pair[],
      );
    let changed = 0;
    const touched = new Map<string, number[]>();
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
    for (const p of pairs.values()) {
      const c = count.get(p.dataset_id, p.item_id, edge) as ItemCounts;
      const before = stored.get(p.dataset_id, p.item_id) as ItemCounts | undefined;
      if (sameCounts(c, before ?? { popularity: 0, purchases: 0 })) continue;
      const pk = this.write(p, c);
      if (pk === undefined) continue;
      changed++;
      touched.set(p.dataset_id, [...(touched.get(p.dataset_id) ?? []), pk]);
    }
    for (const [datasetId, pks] of touched) this.changes.stamp(datasetId, pks, false);
    const next: RollupState = {
      event: last ?? state?.event ?? 0,
      edge: first ? edge : (state?.edge ?? edge),
      at: first ? now : (state?.at ?? now),
    };
    stmt(this.db, 'INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(
      STATE_KEY,
      JSON.stringify(next),
    );
    return { recomputed: pairs.size, changed, more: last !== null && this.hasMore(last) };
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

  private hasMore(after: number): boolean {
    return !!stmt(this.db, 'SELECT 1 FROM events WHERE id > ? AND qty IS NOT NULL LIMIT 1')
      .pluck()
      .get(after);
  }
}
