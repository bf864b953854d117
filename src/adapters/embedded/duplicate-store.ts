import type { DuplicateStore, NeighbourEntry, PassState } from '../../ports/duplicate-store';
import { dismissalKey } from '../dismissal-key';
import { type Db, stmt } from './db';

/** The lease's row in duplicate_state: no dataset id is empty. */
const LEASE = '';

/** The near-duplicate report's state in the embedded SQLite file (contract §18). */
export class SqliteDuplicateStore implements DuplicateStore {
  constructor(private readonly db: Db) {}

  async putEntries(datasetId: string, entries: readonly NeighbourEntry[]): Promise<void> {
    const put = stmt(
      this.db,
      `INSERT INTO duplicate_entries (dataset_id, item_id, processed_at, neighbours)
         VALUES (?, ?, ?, ?)
         ON CONFLICT (dataset_id, item_id) DO UPDATE SET
           processed_at = excluded.processed_at, neighbours = excluded.neighbours`,
    );
    const drop = stmt(
      this.db,
      'DELETE FROM duplicate_entries WHERE dataset_id = ? AND item_id = ?',
    );
    this.db.transaction(() => {
      for (const e of entries)
        if (e.neighbours.length)
          put.run(datasetId, e.id, e.processedAt, JSON.stringify(e.neighbours));
        else drop.run(datasetId, e.id);
    })();
  }

  async entries(datasetId: string): Promise<NeighbourEntry[]> {
    const rows = stmt(
      this.db,
      'SELECT item_id, processed_at, neighbours FROM duplicate_entries WHERE dataset_id = ?',
    ).all(datasetId) as Array<{ item_id: string; processed_at: number; neighbours: string }>;
    return rows.map((r) => ({
      id: r.item_id,
      processedAt: r.processed_at,
      neighbours: JSON.parse(r.neighbours) as NeighbourEntry['neighbours'],
    }));
  }

  async forget(datasetId: string, ids: readonly string[]): Promise<void> {
    const drop = stmt(
      this.db,
      'DELETE FROM duplicate_entries WHERE dataset_id = ? AND item_id = ?',
    );
    this.db.transaction(() => {
      for (const id of ids) drop.run(datasetId, id);
    })();
  }

  async clear(datasetId: string): Promise<void> {
    this.db.transaction(() => {
      stmt(this.db, 'DELETE FROM duplicate_entries WHERE dataset_id = ?').run(datasetId);
      stmt(this.db, 'DELETE FROM duplicate_state WHERE dataset_id = ?').run(datasetId);
    })();
  }

  async dropDataset(datasetId: string): Promise<void> {
    this.db.transaction(() => {
      for (const table of ['duplicate_entries', 'duplicate_state', 'duplicate_dismissals'])
        stmt(this.db, `DELETE FROM ${table} WHERE dataset_id = ?`).run(datasetId);
    })();
  }

  async dismiss(datasetId: string, ids: readonly string[]): Promise<void> {
    const sorted = [...new Set(ids)].sort();
    stmt(
      this.db,
      'INSERT OR IGNORE INTO duplicate_dismissals (dataset_id, key, ids) VALUES (?, ?, ?)',
    ).run(datasetId, dismissalKey(sorted), JSON.stringify(sorted));
  }

  async dismissals(datasetId: string): Promise<string[][]> {
    const rows = stmt(
      this.db,
      'SELECT ids FROM duplicate_dismissals WHERE dataset_id = ? ORDER BY key',
    ).all(datasetId) as Array<{ ids: string }>;
    return rows.map((r) => JSON.parse(r.ids) as string[]);
  }

  async state(datasetId: string): Promise<PassState> {
    return this.read<PassState>(datasetId) ?? {};
  }

  async setState(datasetId: string, state: PassState): Promise<void> {
    this.write(datasetId, state);
  }

  async claim(owner: string, now: number, until: number): Promise<boolean> {
    return this.db
      .transaction((): boolean => {
        const cur = this.read<{ owner: string; until: number }>(LEASE);
        if (cur && cur.owner !== owner && cur.until > now) return false;
        this.write(LEASE, { owner, until });
        return true;
      })
      .immediate();
  }

  private read<T>(key: string): T | undefined {
    const r = stmt(this.db, 'SELECT value FROM duplicate_state WHERE dataset_id = ?').get(key) as
      { value: string } | undefined;
    return r && (JSON.parse(r.value) as T);
  }

  private write(key: string, value: unknown): void {
    stmt(
      this.db,
      `INSERT INTO duplicate_state (dataset_id, value) VALUES (?, ?)
         ON CONFLICT (dataset_id) DO UPDATE SET value = excluded.value`,
    ).run(key, JSON.stringify(value));
  }
}
