import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { EventBus, ProgressNotice } from '../../../ports/event-bus';
import { openDb, stmt, type Db } from '../../embedded/db';

/** How often a process with subscribers looks for notices other processes wrote. */
const POLL_MS = 200;
/** Rows older than this are gone: a poller is never that far behind while it polls. */
const KEEP_MS = 60_000;
const PRUNE_EVERY_MS = 10_000;

/**
 * Progress notices for QUEUE=inprocess, in the queue's SQLite file: a notice is handed at once to
 * this process's subscribers and written to a table that other processes on the same DATA_DIR
 * read by id cursor, only while they have subscribers. Best effort like the port: a write that
 * fails is counted and forgotten.
 */
export class SqliteEventBus implements EventBus {
  private readonly db: Db;
  /** Marks this process's rows, which it delivered already. */
  private readonly origin = crypto.randomUUID();
  private readonly listeners = new Set<(n: ProgressNotice) => void>();
  private cursor = 0;
  private timer?: NodeJS.Timeout;
  private prunedAt = 0;
  private closed = false;
  /** Notices that could not be written for other processes. */
  dropped = 0;

  constructor(
    file: string,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.db = openDb(file);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS bus_notices (
        id INTEGER PRIMARY KEY, at INTEGER NOT NULL, origin TEXT NOT NULL, body TEXT NOT NULL
      );
    `);
  }

  async publish(notices: ProgressNotice[]): Promise<void> {
    if (notices.length === 0 || this.closed) return;
    for (const n of notices) this.deliver(n);
    try {
      const at = this.now();
      stmt(this.db, `INSERT INTO bus_notices (at, origin, body) VALUES (?, ?, ?)`).run(
        at,
        this.origin,
        JSON.stringify(notices),
      );
      if (at - this.prunedAt >= PRUNE_EVERY_MS) {
        this.prunedAt = at;
        stmt(this.db, `DELETE FROM bus_notices WHERE at < ?`).run(at - KEEP_MS);
      }
    } catch (err) {
      this.dropped += notices.length;
      this.log.warn({ err, dropped: this.dropped }, 'progress notices dropped: queue.db write');
    }
  }

  subscribe(on: (n: ProgressNotice) => void): () => void {
    const listener = (n: ProgressNotice): void => on(n);
    if (this.listeners.size === 0 && !this.closed) this.startPolling();
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stopPolling();
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.stopPolling();
    this.db.close();
  }

  private startPolling(): void {
    // From now on: what was published before the first subscriber is not for it.
    const top = stmt(this.db, `SELECT MAX(id) AS id FROM bus_notices`).get() as {
      id: number | null;
    };
    this.cursor = top.id ?? 0;
    this.timer = setInterval(() => this.poll(), POLL_MS);
    this.timer.unref();
  }

  private stopPolling(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private poll(): void {
    let rows: Array<{ id: number; origin: string; body: string }>;
    try {
      rows = stmt(
        this.db,
        `SELECT id, origin, body FROM bus_notices WHERE id > ? ORDER BY id LIMIT 1000`,
      ).all(this.cursor) as typeof rows;
    } catch (err) {
      this.log.warn({ err }, 'could not read progress notices');
      return;
    }
    for (const row of rows) {
      this.cursor = row.id;
      if (row.origin === this.origin) continue;
      try {
        for (const n of JSON.parse(row.body) as ProgressNotice[]) this.deliver(n);
      } catch (err) {
        this.log.warn({ err }, 'unreadable progress notice; ignored');
      }
    }
  }

  private deliver(n: ProgressNotice): void {
    for (const l of this.listeners) {
      try {
        l(n);
      } catch (err) {
        this.log.warn({ err }, 'a progress subscriber failed');
      }
    }
  }
}
