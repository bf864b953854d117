import type { RequestType } from '../domain/plan';

/** One billable Vision API request. `micro` is credits × 1,000,000. */
export interface RequestCharge {
  org: string;
  datasetId: string;
  type: RequestType;
  micro: number;
  at: number;
  vars?: Record<string, string>;
}

export interface MonthUsage {
  /** Total micro-credits charged in the month. */
  micro: number;
  perDataset: Array<{ datasetId: string; type: RequestType; requests: number; micro: number }>;
  /** Newest event in the month (epoch ms), if any. */
  lastAt?: number;
}

/**
 * Where metering lives. The 402 decision and the charge are one atomic step, so a fixed
 * package of R credits admits exactly R requests however many arrive at once.
 */
export interface UsageLedger {
  /** Charges unless it would take the month past `limitMicro`; returns the event id or undefined. */
  charge(c: RequestCharge, limitMicro: number | undefined): Promise<number | undefined>;
  /** Takes back a charge whose request then failed (only 2xx responses count). */
  refund(eventId: number): Promise<void>;
  month(org: string, year: number, month: number): Promise<MonthUsage>;
  /**
   * Counts one processed image; idempotent per (dataset, item, url), so a redelivered job is
   * never counted twice.
   */
  recordImage(e: {
    org: string;
    datasetId: string;
    itemId: string;
    url: string;
    at: number;
  }): Promise<void>;
  /** Images processed in a UTC year, and the newest such event. */
  images(org: string, year: number): Promise<{ processed: number; lastAt?: number }>;
}
