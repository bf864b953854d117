import type { RequestType } from '../../domain/plan';
import type { MonthUsage, RequestCharge, UsageLedger } from '../../ports/usage-ledger';
import { guarded, type Db } from './db';

const ym = (at: number): number => {
  const d = new Date(at);
  return d.getUTCFullYear() * 100 + d.getUTCMonth() + 1;
};

/** The ledger in the embedded SQLite file (shared by every process of an installation). */
export class SqliteUsageLedger implements UsageLedger {
  constructor(private readonly db: Db) {}

  charge(c: RequestCharge, limitMicro: number | undefined): Promise<number | undefined> {
    const month = ym(c.at);
    // IMMEDIATE takes the write lock before reading the total, so API processes sharing the
    // file cannot both pass the check on the same remaining credit.
    const tx = this.db.transaction((): number | undefined => {
      const row = this.db
        .prepare('SELECT micro FROM usage_month WHERE org = ? AND ym = ?')
        .get(c.org, month) as { micro: number } | undefined;
      if (limitMicro !== undefined && (row?.micro ?? 0) + c.micro > limitMicro) return undefined;
      const id = this.db
        .prepare(
          'INSERT INTO usage_events (org, dataset_id, type, micro, ym, at, vars) VALUES (?, ?, ?, ?, ?, ?, ?)',
        )
        .run(
          c.org,
          c.datasetId,
          c.type,
          c.micro,
          month,
          c.at,
          c.vars ? JSON.stringify(c.vars) : null,
        ).lastInsertRowid;
      this.bump(c.org, month, c.datasetId, c.type, 1, c.micro, c.at);
      return Number(id);
    });
    return guarded(() => tx.immediate());
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
    this.db
      .prepare(
        `INSERT INTO usage_month (org, ym, micro) VALUES (?, ?, ?)
         ON CONFLICT (org, ym) DO UPDATE SET micro = micro + excluded.micro`,
      )
      .run(org, month, micro);
    this.db
      .prepare(
        `INSERT INTO usage_counters (org, ym, dataset_id, type, requests, micro, last_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (org, ym, dataset_id, type) DO UPDATE SET
           requests = requests + excluded.requests, micro = micro + excluded.micro,
           last_at = max(last_at, excluded.last_at)`,
      )
      .run(org, month, ds, type, n, micro, at);
  }

  refund(eventId: number): Promise<void> {
    const tx = this.db.transaction(() => {
      const e = this.db
        .prepare(
          'DELETE FROM usage_events WHERE id = ? RETURNING org, ym, dataset_id, type, micro, at',
        )
        .get(eventId) as
        | { org: string; ym: number; dataset_id: string; type: string; micro: number; at: number }
        | undefined;
      if (e) this.bump(e.org, e.ym, e.dataset_id, e.type, -1, -e.micro, 0);
    });
    return guarded(() => tx.immediate());
  }

  month(org: string, year: number, month: number): Promise<MonthUsage> {
    return guarded(() => {
      const key = year * 100 + month;
      const rows = this.db
        .prepare(
          'SELECT dataset_id, type, requests, micro, last_at FROM usage_counters WHERE org = ? AND ym = ? AND requests > 0 ORDER BY dataset_id, type',
        )
        .all(org, key) as Array<{
        dataset_id: string;
        type: RequestType;
        requests: number;
        micro: number;
        last_at: number;
      }>;
      const total = this.db
        .prepare('SELECT micro FROM usage_month WHERE org = ? AND ym = ?')
        .get(org, key) as { micro: number } | undefined;
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
    });
  }

  recordImage(e: {
    org: string;
    datasetId: string;
    itemId: string;
    url: string;
    at: number;
  }): Promise<void> {
    return guarded(() => {
      this.db
        .prepare(
          'INSERT OR IGNORE INTO image_events (dataset_id, item_id, url, org, year, at) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(e.datasetId, e.itemId, e.url, e.org, new Date(e.at).getUTCFullYear(), e.at);
    });
  }

  images(org: string, year: number): Promise<{ processed: number; lastAt?: number }> {
    return guarded(() => {
      const r = this.db
        .prepare(
          'SELECT count(*) AS n, max(at) AS last FROM image_events WHERE org = ? AND year = ?',
        )
        .get(org, year) as { n: number; last: number | null };
      return { processed: r.n, ...(r.last !== null ? { lastAt: r.last } : {}) };
    });
  }
}
