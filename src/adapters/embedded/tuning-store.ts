import type { TuningStore } from '../../ports/tuning-store';
import { stmt, type Db } from './db';

/** Tuned-similarity projections and the fitting lease in the embedded SQLite file. */
export class EmbeddedTuningStore implements TuningStore {
  constructor(private readonly db: Db) {}

  async putModel(datasetId: string, id: string, bytes: Uint8Array): Promise<void> {
    const r = stmt(
      this.db,
      'INSERT OR IGNORE INTO tuning_models (id, dataset_id, bytes, created_at) VALUES (?, ?, ?, ?)',
    ).run(id, datasetId, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), Date.now());
    // ids are never reused: a second write under one is a mistake, refused as on Elasticsearch
    if (r.changes !== 1) throw new Error(`tuning model ${id} exists already`);
  }

  async getModel(datasetId: string, id: string): Promise<Uint8Array | undefined> {
    const r = stmt(this.db, 'SELECT bytes FROM tuning_models WHERE id = ? AND dataset_id = ?').get(
      id,
      datasetId,
    ) as { bytes: Buffer } | undefined;
    return r && new Uint8Array(r.bytes);
  }

  async pruneModels(datasetId: string, keep: readonly string[]): Promise<void> {
    stmt(
      this.db,
      `DELETE FROM tuning_models WHERE dataset_id = ? AND id NOT IN (SELECT value FROM json_each(?))`,
    ).run(datasetId, JSON.stringify(keep));
  }

  async claim(owner: string, now: number, until: number): Promise<boolean> {
    return this.db
      .transaction((): boolean => {
        const cur = stmt(
          this.db,
          "SELECT owner, until FROM tuning_lease WHERE key = 'fit'",
        ).get() as { owner: string; until: number } | undefined;
        if (cur && cur.owner !== owner && cur.until > now) return false;
        stmt(
          this.db,
          `INSERT INTO tuning_lease (key, owner, until) VALUES ('fit', ?, ?)
             ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until`,
        ).run(owner, until);
        return true;
      })
      .immediate();
  }
}
