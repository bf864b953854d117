import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { ProcessingJob } from '../../../domain/item';
import type { JobHandler, JobQueue, QueueStats } from '../../../ports/job-queue';
import { openDb, type Db, stmt } from '../../embedded/db';
import { PauseGate } from '../pause-gate';
import { nextRun, readyAgainAt, settlementFor } from '../../../domain/retry-rule';

const POLL_MS = 1000;

interface JobRow {
  id: number;
  payload: string;
  attempt: number;
  run_at: number;
}

/**
 * A durable queue in its own SQLite file: a job survives a crash from the moment `enqueue`
 * resolves. Jobs are keyed by (dataset, item, url), so re-enqueueing the same work is a no-op.
 * One consuming process per file: on start, jobs left running by a crash are made ready again.
 */
export class SqliteJobQueue implements JobQueue {
  private readonly db: Db;
  private readonly wake = new EventEmitter();
  private inFlight = new Set<Promise<void>>();
  private running = false;
  private timer?: NodeJS.Timeout;
  private gate?: PauseGate;
  onRecovered?: () => void;

  constructor(
    file: string,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    /** First delay after an unexpected handler error; later ones double. */
    private readonly unexpectedRetryBaseMs = 1000,
  ) {
    this.db = openDb(file);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, payload TEXT NOT NULL,
        attempt INTEGER NOT NULL, run_at INTEGER NOT NULL, state TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(state, run_at);
      CREATE TABLE IF NOT EXISTS dead_jobs (
        id INTEGER PRIMARY KEY, payload TEXT NOT NULL, error TEXT NOT NULL, died_at INTEGER NOT NULL
      );
    `);
  }

  async enqueue(jobs: ProcessingJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const ins = stmt(
      this.db,
      `INSERT INTO jobs (key, payload, attempt, run_at, state) VALUES (?, ?, ?, ?, 'ready') ON CONFLICT(key) DO NOTHING`,
    );
    const at = this.now();
    this.db.transaction(() => {
      for (const j of jobs)
        ins.run(`${j.datasetId}\u0000${j.itemId}\u0000${j.url}`, JSON.stringify(j), j.attempt, at);
    })();
    this.wake.emit('job');
  }

  async consume(
    handler: JobHandler,
    concurrency: number,
    probe?: () => Promise<void>,
  ): Promise<void> {
    stmt(this.db, `UPDATE jobs SET state = 'ready' WHERE state = 'running'`).run();
    this.running = true;
    const pump = (): void => {
      if (!this.running || this.gate?.paused) return;
      const free = concurrency - this.inFlight.size;
      if (free <= 0) return;
      const claimed = stmt(
        this.db,
        `UPDATE jobs SET state = 'running' WHERE id IN (
             SELECT id FROM jobs WHERE state = 'ready' AND run_at <= ? ORDER BY run_at, id LIMIT ?
           ) RETURNING id, payload, attempt, run_at`,
      ).all(this.now(), free) as JobRow[];
      for (const row of claimed) {
        const p = this.runOne(row, handler).finally(() => {
          this.inFlight.delete(p);
          setImmediate(pump);
        });
        this.inFlight.add(p);
      }
      this.schedule(pump);
    };
    this.wake.on('job', pump);
    if (probe)
      this.gate = new PauseGate(
        probe,
        this.log,
        () => undefined,
        () => {
          pump();
          this.onRecovered?.();
        },
      );
    pump();
  }

  /** Wakes at the next delayed job (or after POLL_MS) so retries run on time. */
  private schedule(pump: () => void): void {
    if (this.timer) clearTimeout(this.timer);
    if (!this.running) return;
    const next = stmt(this.db, `SELECT MIN(run_at) AS t FROM jobs WHERE state = 'ready'`).get() as {
      t: number | null;
    };
    const delay = next.t === null ? POLL_MS : Math.max(5, Math.min(POLL_MS, next.t - this.now()));
    this.timer = setTimeout(pump, delay);
    this.timer.unref();
  }

  private async runOne(row: JobRow, handler: JobHandler): Promise<void> {
    const job = { ...(JSON.parse(row.payload) as ProcessingJob), attempt: row.attempt };
    try {
      await handler(job);
      stmt(this.db, 'DELETE FROM jobs WHERE id = ?').run(row.id);
    } catch (e) {
      const next = settlementFor(e, row.attempt, this.unexpectedRetryBaseMs);
      if (next.kind === 'dead') {
        this.log.error({ err: e, job }, 'job failed repeatedly; moved to dead_jobs');
        this.db.transaction(() => {
          stmt(this.db, 'INSERT INTO dead_jobs (payload, error, died_at) VALUES (?, ?, ?)').run(
            row.payload,
            String(e),
            this.now(),
          );
          stmt(this.db, 'DELETE FROM jobs WHERE id = ?').run(row.id);
        })();
        return;
      }
      if (next.kind === 'wait') this.gate?.pause(next.reason);
      else if (next.kind === 'retry' && next.unexpected)
        this.log.warn({ err: e, job }, 'job failed unexpectedly; will retry');
      const again = nextRun(job, next);
      const runAt = readyAgainAt(next, !!this.gate, row.run_at, this.now());
      stmt(
        this.db,
        `UPDATE jobs SET state = 'ready', attempt = ?, payload = ?, run_at = ? WHERE id = ?`,
      ).run(again.attempt, JSON.stringify(again), runAt, row.id);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.gate?.stop();
    if (this.timer) clearTimeout(this.timer);
    this.wake.removeAllListeners();
    await Promise.allSettled([...this.inFlight]);
  }

  async stats(): Promise<QueueStats> {
    const now = this.now();
    const r = stmt(
      this.db,
      `SELECT
             SUM(state = 'ready' AND run_at <= ?) AS ready,
             SUM(state = 'ready' AND run_at > ?) AS delayed,
             SUM(state = 'running') AS running,
             MIN(CASE WHEN state = 'ready' AND run_at <= ? THEN run_at END) AS oldest
           FROM jobs`,
    ).get(now, now, now) as {
      ready: number | null;
      delayed: number | null;
      running: number | null;
      oldest: number | null;
    };
    const dead = (stmt(this.db, 'SELECT COUNT(*) AS n FROM dead_jobs').get() as { n: number }).n;
    return {
      ready: r.ready ?? 0,
      delayed: r.delayed ?? 0,
      running: r.running ?? 0,
      dead,
      oldestReadyAgeMs: r.oldest === null ? 0 : now - r.oldest,
    };
  }

  async ping(): Promise<void> {
    stmt(this.db, 'SELECT 1').get();
  }

  async close(): Promise<void> {
    await this.stop();
    this.db.close();
  }
}
