/** What one admission attempt answered. */
export interface RateAdmission {
  admitted: boolean;
  /** Seconds until the window that refused ends (at least 1); 0 when admitted. */
  retryAfterS: number;
}

/**
 * Per-key request allowances in fixed, UTC-aligned 60-second windows (contract §16 `rate`).
 * Shared like every other piece of state (contract §12): with Elasticsearch, any number of API
 * hosts together admit at most `limit` requests of one key per window.
 */
export interface RateCounter {
  /** Takes one request from `key`'s allowance of `limit` in the window holding `now` (epoch ms). */
  take(key: string, limit: number, now: number): Promise<RateAdmission>;
}
