import type { ProcessingJob } from '../domain/item';

/** Thrown by a handler to have the job tried again after `delayMs`. */
export class RetryLater extends Error {
  constructor(
    readonly delayMs: number,
    message: string,
  ) {
    super(message);
    this.name = 'RetryLater';
  }
}

/**
 * Thrown by a handler to run the job again after `delayMs` without counting an attempt: it
 * stepped aside for other work (its `deferrals` is counted instead).
 */
export class Defer extends Error {
  constructor(readonly delayMs: number) {
    super(`deferred for ${delayMs} ms`);
    this.name = 'Defer';
  }
}

export type JobHandler = (job: ProcessingJob) => Promise<void>;

export interface QueueStats {
  ready: number;
  delayed: number;
  running: number;
  dead: number;
  /**
   * How long the oldest runnable job has waited, 0 when none waits; it keeps growing while the
   * consumer is paused (a job put back to wait keeps the time it became runnable). RabbitMQ
   * cannot be read without taking a message, so there it is inferred from the jobs this process
   * was given (an upper bound); undefined where that says nothing: nothing consumes, or nothing
   * was given yet.
   */
  oldestReadyAgeMs?: number;
}

export interface JobQueue {
  /** Resolves once the jobs are durable: they survive a crash of this process. */
  enqueue(jobs: ProcessingJob[]): Promise<void>;
  /**
   * Starts consuming with at most `concurrency` jobs in flight. A handler that fails because a
   * dependency is unavailable (AppError `unavailable`) puts its job back uncounted, and the
   * queue takes no more jobs until `probe` resolves (domain/retry-rule.ts).
   */
  consume(handler: JobHandler, concurrency: number, probe?: () => Promise<void>): Promise<void>;
  /** Stops taking jobs and waits for those in flight. */
  stop(): Promise<void>;
  stats(): Promise<QueueStats>;
  ping(): Promise<void>;
  /**
   * Set by the worker: called after an outage ends (the broker connection is back, or a paused
   * consumer resumed), when items may have been left without a job.
   */
  onRecovered?: () => void;
  close(): Promise<void>;
}
