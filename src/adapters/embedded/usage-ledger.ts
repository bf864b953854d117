import type { RequestType } from '../../domain/plan';
import {
  RESERVATION_TTL_MS,
  utcYearMonth as ym,
  type Admission,
  type ChargeReceipt,
  type ImageCount,
  type ImageKey,
  type MonthUsage,
  type RequestCharge,
  type UsageLedger,
} from '../../ports/usage-ledger';
import { type Db, stmt } from './db';

/** The ledger in the embedded SQLite file (shared by every process of an installation). */
export class SqliteUsageLedger implements UsageLedger {
  constructor(private readonly db: Db) {}

  async charge(
    c: RequestCharge,
    limitMicro: number | undefined,
  ): Promise<ChargeReceipt | undefined> {
    const month = ym(c.at);
    // IMMEDIATE takes the write lock before reading the total, so API processes sharing the
    // file cannot both pass the check on the same remaining credit.
    const tx = this.db.transaction((): ChargeReceipt | undefined => {
      const row = stmt(this.db, 'SELECT micro FROM usage_month WHERE org = ? AND ym = ?').get(
        c.org,
        month,
      ) as { micro: number } | undefined;
      if (limitMicro !== undefined && (row?.micro ?? 0) + c.micro > limitMicro) return undefined;
      const id = stmt(
        this.db,
        'INSERT INTO usage_events (org, dataset_id, type, micro, ym, at, vars) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ).run(c.org, c.datasetId, c.type, c.micro, month, c.at, null).lastInsertRowid;
      this.bump(c.org, month, c.datasetId, c.type, 1, c.micro, c.at);
      return { id: String(id), charge: c };
    });
    return tx.immediate();
  }

  private bump(
    org: string,
    month: number,
    ds: string,
    type: string,
    n: number,
    micro: number,
    at: number,
  ): void {
    stmt(
      this.db,
      `INSERT INTO usage_month (org, ym, micro) VALUES (?, ?, ?)
         ON CONFLICT (org, ym) DO UPDATE SET micro = micro + excluded.micro`,
    ).run(org, month, micro);
    stmt(
      this.db,
      `INSERT INTO usage_counters (org, ym, dataset_id, type, requests, micro, last_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (org, ym, dataset_id, type) DO UPDATE SET
           requests = requests + excluded.requests, micro = micro + excluded.micro,
           last_at = max(last_at, excluded.last_at)`,
    ).run(org, month, ds, type, n, micro, at);
  }

  /** One SQLite transaction decides and records at once: nothing is left to record after. */
  async admit(c: RequestCharge, limitMicro: number | undefined): Promise<Admission | undefined> {
    const receipt = await this.charge(c, limitMicro);
    return receipt && { receipt, recorded: Promise.resolve() };
  }

  async refund(receipt: ChargeReceipt): Promise<void> {
    const eventId = Number(receipt.id);
    const tx = this.db.transaction(() => {
      const e = stmt(
        this.db,
        'DELETE FROM usage_events WHERE id = ? RETURNING org, ym, dataset_id, type, micro, at',
      ).get(eventId) as
        | { org: string; ym: number; dataset_id: string; type: string; micro: number; at: number }
        | undefined;
      if (e) this.bump(e.org, e.ym, e.dataset_id, e.type, -1, -e.micro, 0);
    });
    return tx.immediate();
  }

  async month(org: string, year: number, month: number): Promise<MonthUsage> {
    const key = year * 100 + month;
    const rows = stmt(
      this.db,
      'SELECT dataset_id, type, requests, micro, last_at FROM usage_counters WHERE org = ? AND ym = ? AND requests > 0 ORDER BY dataset_id, type',
    ).all(org, key) as Array<{
      dataset_id: string;
      type: RequestType;
      requests: number;
      micro: number;
      last_at: number;
    }>;
    const total = stmt(this.db, 'SELECT micro FROM usage_month WHERE org = ? AND ym = ?').get(
      org,
      key,
    ) as { micro: number } | undefined;
    const lastAt = rows.reduce<number | undefined>(
      (m, r) => (m === undefined || r.last_at > m ? r.last_at : m),
      undefined,
    );
    return {
      micro: total?.micro ?? 0,
      perDataset: rows.map((r) => ({
        datasetId: r.dataset_id,
        type: r.type,
        requests: r.requests,
        micro: r.micro,
      })),
      lastAt,
    };
  }

  async reserveImage(
    e: ImageKey & { org: string; at: number },
    limit: number | undefined,
  ): Promise<boolean> {
    const year = new Date(e.at).getUTCFullYear();
    const tx = this.db.transaction((): boolean => {
      const mine = stmt(
        this.db,
        'SELECT 1 FROM image_events WHERE dataset_id = ? AND item_id = ? AND url = ?',
      ).get(e.datasetId, e.itemId, e.url);
      if (mine) return true;
      if (limit !== undefined) {
        const { n } = stmt(
          this.db,
          `SELECT (SELECT count(*) FROM image_counts WHERE org = ? AND year = ?)
                + (SELECT count(*) FROM image_events WHERE org = ? AND year = ? AND at > ?) AS n`,
        ).get(e.org, year, e.org, year, e.at - RESERVATION_TTL_MS) as { n: number };
        if (n >= limit) return false;
      }
      stmt(
        this.db,
        'INSERT INTO image_events (dataset_id, item_id, url, org, year, at, counted) VALUES (?, ?, ?, ?, ?, ?, 0)',
      ).run(e.datasetId, e.itemId, e.url, e.org, year, e.at);
      return true;
    });
    return tx.immediate();
  }

  async releaseImage(e: ImageKey & { org: string; at: number }): Promise<void> {
    stmt(this.db, 'DELETE FROM image_events WHERE dataset_id = ? AND item_id = ? AND url = ?').run(
      e.datasetId,
      e.itemId,
      e.url,
    );
  }

  private imageBatch: Array<{
    e: ImageCount;
    done: (err?: unknown) => void;
  }> = [];

  /**
   * Group commit: events recorded in the same turn of the event loop (concurrent workers) share
   * one transaction, so one fsync, instead of one each. Each promise still settles only after
   * its event is on disk.
   */
  recordImage(e: ImageCount): Promise<void> {
    return new Promise((resolve, reject) => {
      this.imageBatch.push({ e, done: (err) => (err === undefined ? resolve() : reject(err)) });
      if (this.imageBatch.length === 1) setImmediate(() => this.flushImages());
    });
  }

  private flushImages(): void {
    const batch = this.imageBatch;
    this.imageBatch = [];
    try {
      this.db
        .transaction(() => {
          const insert = stmt(
            this.db,
            `INSERT OR IGNORE INTO image_counts (dataset_id, item_id, url, processed_at, org, year, at)
               VALUES (?, ?, ?, ?, ?, ?, ?)`,
          );
          const release = stmt(
            this.db,
            'DELETE FROM image_events WHERE dataset_id = ? AND item_id = ? AND url = ?',
          );
          for (const { e } of batch) {
            insert.run(
              e.datasetId,
              e.itemId,
              e.url,
              e.processedAt,
              e.org,
              new Date(e.at).getUTCFullYear(),
              e.at,
            );
            release.run(e.datasetId, e.itemId, e.url);
          }
        })
        .immediate();
    } catch (err) {
      batch.forEach((b) => b.done(err ?? new Error('image event not recorded')));
      return;
    }
    batch.forEach((b) => b.done());
  }

  async images(org: string, year: number): Promise<{ processed: number; lastAt?: number }> {
    const r = stmt(
      this.db,
      'SELECT count(*) AS n, max(at) AS last FROM image_counts WHERE org = ? AND year = ?',
    ).get(org, year) as { n: number; last: number | null };
    return { processed: r.n, ...(r.last !== null ? { lastAt: r.last } : {}) };
  }
}
