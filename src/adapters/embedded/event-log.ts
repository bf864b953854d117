import { eventKeys, type Report, type ReportSpec } from '../../domain/report';
import { countedEvent } from '../../domain/popularity';
import type { EventLog, LoggedEvent } from '../../ports/event-log';
import { type Db, stmt } from './db';
import { sqliteReport } from './report';

interface EventRow {
  org: string;
  dataset_id: string;
  kind: LoggedEvent['kind'];
  type: string;
  at: number;
  vars: string | null;
  total: number | null;
  filters: string | null;
  sort: string | null;
  shown: string | null;
}

/** The event log in the embedded SQLite file. */
export class SqliteEventLog implements EventLog {
  constructor(private readonly db: Db) {}

  async append(events: LoggedEvent[]): Promise<void> {
    if (!events.length) return;
    return this.db.transaction(() => {
      const insert = stmt(
        this.db,
        `INSERT INTO events (org, dataset_id, kind, type, at, vars, total, filters, sort, shown,
             page_view_id, item_id, qty) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      for (const e of events) {
        const keys = eventKeys(e);
        const f = e.facts;
        insert.run(
          e.org,
          e.datasetId,
          e.kind,
          e.type,
          e.at,
          e.vars && Object.keys(e.vars).length ? JSON.stringify(e.vars) : null,
          f?.total ?? null,
          f?.filters.length ? JSON.stringify(f.filters) : null,
          f?.sort ?? null,
          f?.shown?.length ? JSON.stringify(f.shown) : null,
          keys.pageViewId ?? null,
          keys.itemId ?? null,
          countedEvent(e)?.qty ?? null,
        );
      }
    })();
  }

  async list(
    datasetId: string,
    range: { from: number; to: number },
    limit: number,
  ): Promise<LoggedEvent[]> {
    return (
      stmt(
        this.db,
        'SELECT * FROM events WHERE dataset_id = ? AND at >= ? AND at < ? ORDER BY at, id LIMIT ?',
      ).all(datasetId, range.from, range.to, limit) as EventRow[]
    ).map((r) => ({
      org: r.org,
      datasetId: r.dataset_id,
      kind: r.kind,
      type: r.type,
      at: r.at,
      ...(r.vars ? { vars: JSON.parse(r.vars) as Record<string, string> } : {}),
      ...(r.total !== null
        ? {
            facts: {
              total: r.total,
              filters: r.filters ? (JSON.parse(r.filters) as string[]) : [],
              ...(r.sort !== null ? { sort: r.sort } : {}),
              ...(r.shown ? { shown: JSON.parse(r.shown) as string[] } : {}),
            },
          }
        : {}),
    }));
  }

  async report(datasetId: string, spec: ReportSpec): Promise<Report> {
    return sqliteReport(this.db, datasetId, spec);
  }
}
