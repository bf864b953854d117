import type { RequestType } from '../domain/plan';

/** One billable Vision API request. `micro` is credits × 1,000,000. */
export interface RequestCharge {
  org: string;
  datasetId: string;
  type: RequestType;
  micro: number;
  at: number;
}

/** What a successful charge returns: enough to take it back. */
export interface ChargeReceipt {
  id: string;
  charge: RequestCharge;
  /** Admitted from credits set aside (Admission): its refund must follow its record. */
  leased?: boolean;
}

/**
 * A charge, admitted. `recorded` settles once the charge is in the ledger: with credits this
 * process holds already (a lease), or with no limit to decide against, the request need not
 * wait for it.
 */
export interface Admission {
  receipt: ChargeReceipt;
  recorded: Promise<void>;
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
  /**
   * Charges unless it would take the month past `limitMicro`; undefined when refused. Resolves
   * once the charge is recorded (what `month` reads on any host).
   */
  charge(c: RequestCharge, limitMicro: number | undefined): Promise<ChargeReceipt | undefined>;
  /**
   * The same decision, resolved as soon as it is taken: an adapter that can admit from credits
   * set aside for this process beforehand does so without a round trip, and records the charge
   * after (`recorded`). Still exact: the credits were taken from the package when set aside.
   * Without a limit (`undefined`) the charge is never refused, so it is admitted at once and
   * may be recorded with others after.
   */
  admit(c: RequestCharge, limitMicro: number | undefined): Promise<Admission | undefined>;
  /** Takes back a charge whose request then failed (only 2xx responses count). Never refused. */
  refund(receipt: ChargeReceipt): Promise<void>;
  month(org: string, year: number, month: number): Promise<MonthUsage>;
  /**
   * Holds a place in the yearly image allowance before an image is downloaded, so workers
   * running at once cannot overshoot a fixed limit. False when the year's allowance (counted
   * images plus recent reservations) is used up. A reservation that is neither confirmed nor
   * released (a crashed worker) stops counting after RESERVATION_TTL_MS; a redelivered job
   * finds its own reservation and keeps it.
   */
  reserveImage(
    e: ImageKey & { org: string; at: number },
    limit: number | undefined,
  ): Promise<boolean>;
  /** Gives a place back (`at` as given to reserveImage). */
  releaseImage(e: ImageKey & { org: string; at: number }): Promise<void>;
  /**
   * Counts one successful processing of an item's url and frees its reservation. Idempotent per
   * processing (dataset, item, url, processedAt), so a redelivered job is never counted twice,
   * while a later processing of the same url (A → B → A, or deleted and pushed again) counts
   * again (contract §8).
   */
  recordImage(e: ImageCount): Promise<void>;
  /** Images processed in a UTC year, and the newest such event. */
  images(org: string, year: number): Promise<{ processed: number; lastAt?: number }>;
  /** Gives back what this process holds of any package (shutdown). */
  close?(): Promise<void>;
}

export interface ImageKey {
  datasetId: string;
  itemId: string;
  url: string;
}

export interface ImageCount extends ImageKey {
  org: string;
  /** When the image was counted. */
  at: number;
  /** When the item was marked processed from this url: tells processings of one url apart. */
  processedAt: number;
  /**
   * False when the job took no place in a fixed allowance (reserveImage) for this image, so
   * there is none to free; left out when not known (a redelivered job), which frees any.
   */
  held?: boolean;
}

export const RESERVATION_TTL_MS = 15 * 60_000;

/** The UTC month of an instant as yyyymm: credits are counted per calendar month (contract §8). */
export const utcYearMonth = (at: number): number => {
  const d = new Date(at);
  return d.getUTCFullYear() * 100 + d.getUTCMonth() + 1;
};
