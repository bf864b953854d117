import { AppError } from './errors';
import type { ProcessingJob } from './item';
import { Defer, RetryLater } from '../ports/job-queue';

/** Unexpected handler errors (bugs) are retried this often before a job is parked as dead. */
export const MAX_UNEXPECTED_ATTEMPTS = 5;

/** What a queue does with a job whose handler threw. Every queue adapter follows this rule. */
export type Settlement =
  /** Run it again after `delayMs`, with the attempt counted; `unexpected`: not asked for (a bug). */
  | { kind: 'retry'; delayMs: number; unexpected: boolean }
  /** Run it again after `delayMs`, with its deferrals counted instead of its attempts. */
  | { kind: 'defer'; delayMs: number }
  /**
   * A dependency the handler needs (the store) is unreachable: put the job back as it was, with
   * no attempt counted, and stop taking jobs until the dependency answers again. Otherwise an
   * outage longer than a few backoffs would burn every job's attempts into the dead queue.
   */
  | { kind: 'wait'; reason: string }
  /** Park it for an operator: it failed unexpectedly too often. */
  | { kind: 'dead'; reason: string };

export function settlementFor(e: unknown, attempt: number, unexpectedBaseMs: number): Settlement {
  if (e instanceof RetryLater) return { kind: 'retry', delayMs: e.delayMs, unexpected: false };
  if (e instanceof Defer) return { kind: 'defer', delayMs: e.delayMs };
  if (e instanceof AppError && e.code === 'unavailable') return { kind: 'wait', reason: e.message };
  if (attempt >= MAX_UNEXPECTED_ATTEMPTS)
    return { kind: 'dead', reason: e instanceof Error ? e.message : String(e) };
  return { kind: 'retry', delayMs: unexpectedBaseMs * 2 ** attempt, unexpected: true };
}

/** The job as it is put back for a settlement that runs it again. */
export function nextRun(
  job: ProcessingJob,
  s: Exclude<Settlement, { kind: 'dead' }>,
): ProcessingJob {
  if (s.kind === 'retry') return { ...job, attempt: job.attempt + 1 };
  if (s.kind === 'defer') return { ...job, deferrals: (job.deferrals ?? 0) + 1 };
  return job;
}

/** Delay before the job runs again; a wait with a probe to gate on is put back at once. */
export function delayOf(s: Exclude<Settlement, { kind: 'dead' }>, gated: boolean): number {
  if (s.kind !== 'wait') return s.delayMs;
  return gated ? 0 : 1000;
}

/**
 * When a job put back becomes runnable again (epoch ms). A job put back at once to wait for a
 * dependency keeps `readyAt`, the time it first became runnable: it has been waiting all along,
 * so the queue's oldest-job age keeps counting through an outage instead of starting again.
 */
export function readyAgainAt(
  s: Exclude<Settlement, { kind: 'dead' }>,
  gated: boolean,
  readyAt: number,
  now: number,
): number {
  const delay = delayOf(s, gated);
  return s.kind === 'wait' && delay === 0 ? readyAt : now + delay;
}
