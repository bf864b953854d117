import { stmt, type Db } from './db';

/** Tombstones younger than this many write transactions are kept (see prune). */
const KEEP_TRANSACTIONS = 1000;
/** One delete transaction in this many prunes its dataset's old tombstones. */
const PRUNE_EVERY = 100;

/**
 * Writes the change log the in-memory index reads (db.ts, item_changes/change_heads). Called
 * inside the write's own transaction, so a reader sees the data and its stamp together.
 */
export class ChangeLog {
  private deletes = 0;

  constructor(private readonly db: Db) {}

  /** Bumps the dataset's head and stamps each pk with it (gone: the item was deleted). */
  stamp(datasetId: string, pks: Iterable<number>, gone: boolean): void {
    const list = [...pks];
    if (!list.length) return;
    const { seq } = stmt(
      this.db,
      `INSERT INTO change_heads (dataset_id, seq, floor) VALUES (?, 1, 0)
       ON CONFLICT (dataset_id) DO UPDATE SET seq = seq + 1 RETURNING seq`,
    ).get(datasetId) as { seq: number };
    const put = stmt(
      this.db,
      `INSERT INTO item_changes (dataset_id, item_pk, seq, gone) VALUES (?, ?, ?, ?)
       ON CONFLICT (dataset_id, item_pk) DO UPDATE SET seq = excluded.seq, gone = excluded.gone`,
    );
    for (const pk of list) put.run(datasetId, pk, seq, gone ? 1 : 0);
    if (gone && ++this.deletes % PRUNE_EVERY === 0) this.prune(datasetId, seq);
  }

  /**
   * Live items keep one row each; rows of deleted items would pile up, so old ones go and the
   * floor records it: an index that last looked before the floor may have missed a deletion
   * and rebuilds. Keeping the last KEEP_TRANSACTIONS spares an index that reads now and then.
   */
  private prune(datasetId: string, head: number): void {
    const cut = head - KEEP_TRANSACTIONS;
    if (cut <= 0) return;
    stmt(this.db, 'DELETE FROM item_changes WHERE dataset_id = ? AND gone = 1 AND seq <= ?').run(
      datasetId,
      cut,
    );
    stmt(this.db, 'UPDATE change_heads SET floor = MAX(floor, ?) WHERE dataset_id = ?').run(
      cut,
      datasetId,
    );
  }

  /** The dataset is gone: every index of it starts again (from nothing). */
  dropped(datasetId: string): void {
    stmt(this.db, 'DELETE FROM item_changes WHERE dataset_id = ?').run(datasetId);
    stmt(
      this.db,
      `INSERT INTO change_heads (dataset_id, seq, floor) VALUES (?, 1, 1)
       ON CONFLICT (dataset_id) DO UPDATE SET seq = seq + 1, floor = seq + 1`,
    ).run(datasetId);
  }
}

export interface ChangeHead {
  seq: number;
  floor: number;
}

export function changeHead(db: Db, datasetId: string): ChangeHead {
  return (
    (stmt(db, 'SELECT seq, floor FROM change_heads WHERE dataset_id = ?').get(datasetId) as
      ChangeHead | undefined) ?? { seq: 0, floor: 0 }
  );
}

/** The pks stamped after `since` (deleted ones included). */
export function changedSince(db: Db, datasetId: string, since: number): number[] {
  return stmt(db, 'SELECT item_pk FROM item_changes WHERE dataset_id = ? AND seq > ?')
    .pluck()
    .all(datasetId, since) as number[];
}
