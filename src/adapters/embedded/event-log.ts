import type { EventLog, LoggedEvent } from '../../ports/event-log';
import { guarded, type Db, stmt } from './db';

interface EventRow {
  org: string;
  dataset_id: string;
  kind: LoggedEvent['kind'];
  type: string;
  at: number;
  vars: string | null;
}

/** The event log in the embedded SQLite file. */
export class SqliteEventLog implements EventLog {
  constructor(private readonly db: Db) {}

  append(events: LoggedEvent[]): Promise<void> {
    if (!events.length) return Promise.resolve();
    return guarded(() =>
      this.db.transaction(() => {
        const insert = stmt(
          this.db,
          'INSERT INTO events (org, dataset_id, kind, type, at, vars) VALUES (?, ?, ?, ?, ?, ?)',
        );
        for (const e of events)
          insert.run(
            e.org,
            e.datasetId,
            e.kind,
            e.type,
            e.at,
            e.vars && Object.keys(e.vars).length ? JSON.stringify(e.vars) : null,
          );
      })(),
    );
  }

  list(
    datasetId: string,
    range: { from: number; to: number },
    limit: number,
  ): Promise<LoggedEvent[]> {
    return guarded(() =>
      (
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
      })),
    );
  }
}
