import type { RateAdmission } from '../ports/rate-counter';

/** The length of a rate window: fixed, aligned to the UTC minute (contract §16 `rate`). */
export const RATE_WINDOW_MS = 60_000;

/** The window holding `now` (epoch ms): its start and its end (exclusive). */
export function windowOf(now: number): { start: number; end: number } {
  const start = Math.floor(now / RATE_WINDOW_MS) * RATE_WINDOW_MS;
  return { start, end: start + RATE_WINDOW_MS };
}

/** A refusal at `now`: retry when its window ends, in whole seconds, at least 1. */
export function refused(now: number): RateAdmission {
  return { admitted: false, retryAfterS: Math.max(1, Math.ceil((windowOf(now).end - now) / 1000)) };
}

/** An admission (a fresh object: callers may keep or change what they are given). */
export const admitted = (): RateAdmission => ({ admitted: true, retryAfterS: 0 });
