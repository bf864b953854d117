import type { RateAdmission, RateCounter } from '../../ports/rate-counter';
import { admitted, RATE_WINDOW_MS, refused, windowOf } from '../rate-window';

/**
 * Windows kept behind the latest one, so a take stamped a little earlier than the last (requests
 * are not handled in the order of their clock reads) still finds its window's count.
 */
const KEEP_WINDOWS = 2;

/**
 * Per-key rate windows in this process's memory: the embedded engine is one machine and one API
 * process, so nothing else admits requests of the same key, and a count that a restart forgets
 * is one window's allowance at most. Counts are kept per window and a past window is dropped
 * whole once it is KEEP_WINDOWS behind, so memory holds only the keys of the last few minutes.
 */
export class MemoryRateCounter implements RateCounter {
  /** Window start → key → requests admitted. */
  private readonly windows = new Map<number, Map<string, number>>();
  private latest = -Infinity;

  take(key: string, limit: number, now: number): Promise<RateAdmission> {
    const { start } = windowOf(now);
    if (start > this.latest) {
      this.latest = start;
      for (const w of this.windows.keys())
        if (w < start - KEEP_WINDOWS * RATE_WINDOW_MS) this.windows.delete(w);
    }
    let counts = this.windows.get(start);
    if (!counts) this.windows.set(start, (counts = new Map()));
    const n = counts.get(key) ?? 0;
    if (n >= limit) return Promise.resolve(refused(now));
    counts.set(key, n + 1);
    return Promise.resolve(admitted());
  }
}
