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

export type JobHandler = (job: ProcessingJob) => Promise<void>;

export interface QueueStats {
  ready: number;
  delayed: number;
  running: number;
  dead: number;
}

export interface JobQueue {
  /** Resolves once the jobs are durable: they survive a crash of this process. */
  enqueue(jobs: ProcessingJob[]): Promise<void>;
  /** Starts consuming with at most `concurrency` jobs in flight. */
  consume(handler: JobHandler, concurrency: number): Promise<void>;
  /** Stops taking jobs and waits for those in flight. */
  stop(): Promise<void>;
  stats(): Promise<QueueStats>;
  ping(): Promise<void>;
  /**
   * Set by the worker: called after the queue re-established its connection, when messages
   * published during the outage may be missing.
   */
  onReconnect?: () => void;
  close(): Promise<void>;
}
