/** What one roll-up pass did. */
export interface RollupPass {
  /** Items whose counts were recomputed from the event log. */
  recomputed: number;
  /** Items (present in a dataset) whose stored counts changed. */
  changed: number;
}

/**
 * Keeps every item's `service_popularity` and `service_purchases` (contract §14) in step with
 * the event log, in the background: absolute counts recomputed from the log for the items with
 * counted events logged since the last pass and for those whose events crossed the window's
 * edge since then. Counts are stored as generated fields of the item, so every query path
 * (q, sort, figures, fields) reads them like image_width; writing them never changes
 * service_updated_at.
 */
export interface ItemCountsRollup {
  /**
   * One pass at `now`, unless a pass ran (or is running) anywhere in the installation within
   * popularityPassMs: then undefined. Any number of processes may call it at once; the writes
   * are absolute counts, so a pass done twice leaves the same state.
   */
  rollUp(now: number): Promise<RollupPass | undefined>;
}
