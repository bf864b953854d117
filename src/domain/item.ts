import type { Metadata } from './metadata';
import type { ItemCounts } from './popularity';

export type ItemState = 'pending' | 'processed' | 'failed';

/** An item as stored: what was written plus what processing produced. Times are epoch ms. */
export interface StoredItem {
  id: string;
  url: string;
  metadata: Metadata;
  privateMetadata: Metadata;
  state: ItemState;
  createdAt: number;
  updatedAt: number;
  /**
   * What processing found; `processedAt` (epoch ms) names that processing, so the image ledger
   * counts each processing once (contract §8). Absent on items processed before it was kept.
   */
  image?: {
    width: number;
    height: number;
    url: string;
    processedAt?: number;
    /** ImageFeatures.pixelHash; absent for items processed before it was kept. */
    pixelHash?: string;
    /** ImageFeatures.copySignature; absent for items processed before it was kept. */
    copySignature?: string;
  };
  /**
   * service_popularity and service_purchases (contract §14), as the last roll-up of the event
   * log found them (absent: none yet, both 0). `at` is when they were counted (epoch ms): a
   * roll-up never replaces counts with older ones.
   */
  counts?: ItemCounts & { at?: number };
}

export interface ListEntry {
  id: string;
  url: string;
  processed: boolean;
}

export interface ProcessingErrorRecord {
  id: string;
  url: string;
  code: string;
  message: string;
  attempts: number;
  occurredAt: string;
}

/** One image to process: the job is stale (and skipped) once the item's url has changed. */
export interface ProcessingJob {
  datasetId: string;
  itemId: string;
  url: string;
  attempt: number;
  /** Times the job stepped aside for other tenants (jobs/fair-share.ts); not attempts. */
  deferrals?: number;
}
