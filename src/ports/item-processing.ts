import type { ProcessingJob } from '../domain/item';
import type { ImageFeatures, ProcessingFailure } from '../domain/processing';
import type { ActiveProjection } from './search-engine';

/** One page of items to process, and the cursor of the next page when there may be one. */
export interface JobPage {
  jobs: ProcessingJob[];
  next?: string;
}

/** Workers' results on items, and the items the recovery sweeps hand to workers again. */
export interface ItemProcessing {
  /**
   * Records features only if the item still has this url; false when the job was stale. With
   * the dataset's active projection, an engine that stores projections (applyTuning) stores the
   * item's at once; without it (or when the index cannot take it yet) the tuning pass does.
   */
  markProcessed(
    job: ProcessingJob,
    features: ImageFeatures,
    now: number,
    tuning?: ActiveProjection,
  ): Promise<boolean>;
  markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean>;
  /**
   * Replaces a processed item's embedding (an empty vector records that re-embedding failed)
   * only if it still has the job's url; false otherwise.
   */
  markEmbedded(
    job: ProcessingJob,
    /** With the new decode's pixel hash, which replaces the old one. */
    embedding: { vector: number[]; embedder: string; pixelHash?: string; copySignature?: string },
  ): Promise<boolean>;
  /**
   * Records why a pending item waits (quota_postponed) without ending it: it stays pending, so
   * recovery sweeps offer it again. False when the item no longer has the job's url or is done.
   */
  markPostponed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean>;
  /** Items waiting for processing, for re-enqueueing after a crash. */
  pendingJobs(cursor: string | undefined, limit: number): Promise<JobPage>;
  /** Processed items whose embedding is not `embedder`'s, in a stable order, for re-processing. */
  staleEmbeddings(embedder: string, cursor: string | undefined, limit: number): Promise<JobPage>;
  /** How many processed items of a dataset still wait for an embedding by `embedder`. */
  staleEmbeddingCount(datasetId: string, embedder: string): Promise<number>;
}
