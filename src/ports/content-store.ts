import type { ContentWrite, WriteMode } from '../domain/content';
import { AppError } from '../domain/errors';
import type { DatasetCounts } from '../domain/dataset';
import type { ListEntry, ProcessingErrorRecord, ProcessingJob, StoredItem } from '../domain/item';
import type { ImageFeatures, ProcessingFailure } from '../domain/processing';
import type { FieldCatalogue } from '../query/resolve';

export interface StoredEmbedding {
  vector?: number[];
  embedder?: string;
}

/** Items of a dataset and their processing state. */
export interface ContentStore {
  /** Ids of `ids` that exist in the dataset. */
  existingIds(datasetId: string, ids: string[]): Promise<Set<string>>;
  /**
   * Applies validated writes durably and returns the images that now need processing. The
   * embedded store is all or none; Elasticsearch has no multi-document transaction, so a
   * write it refuses half-way throws {@link PartialWrite} with the jobs of what it did write.
   */
  applyWrites(
    datasetId: string,
    writes: ContentWrite[],
    mode: WriteMode,
    now: number,
  ): Promise<ProcessingJob[]>;
  deleteItems(datasetId: string, ids: string[]): Promise<number>;
  dropDataset(datasetId: string): Promise<void>;

  /** Items in id (code point) order. */
  list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]>;
  /**
   * Items by id as queries see them; `latest` reads the newest write instead (a worker deciding
   * what its own job did), which an engine with a refresh delay may answer differently.
   */
  getItems(datasetId: string, ids: string[], opts?: { latest?: boolean }): Promise<StoredItem[]>;
  counts(datasetId: string): Promise<DatasetCounts>;
  catalogue(datasetId: string): Promise<FieldCatalogue>;
  /** Public and generated field names, for content/fields `*`. */
  publicFields(datasetId: string): Promise<string[]>;

  /** Records features only if the item still has this url; false when the job was stale. */
  markProcessed(job: ProcessingJob, features: ImageFeatures, now: number): Promise<boolean>;
  markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean>;
  /**
   * A processed item's embedding and the embedder that made it; undefined when the item is
   * unknown or not processed. `vector` is absent when the image could not be embedded again
   * after an embedder change, `embedder` too when the item predates embeddings.
   */
  getEmbedding(
    datasetId: string,
    id: string,
    opts?: { latest?: boolean },
  ): Promise<StoredEmbedding | undefined>;
  /**
   * Replaces a processed item's embedding (an empty vector records that re-embedding failed)
   * only if it still has the job's url; false otherwise.
   */
  markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string },
  ): Promise<boolean>;
  /** Processed items whose embedding is not `embedder`'s, in a stable order, for re-processing. */
  staleEmbeddings(
    embedder: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }>;
  /** How many processed items of a dataset still wait for an embedding by `embedder`. */
  staleEmbeddingCount(datasetId: string, embedder: string): Promise<number>;
  /**
   * Records why a pending item waits (quota_postponed) without ending it: it stays pending, so
   * recovery sweeps offer it again. False when the item no longer has the job's url or is done.
   */
  markPostponed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean>;
  listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }>;
  /** Items waiting for processing, for re-enqueueing after a crash. */
  pendingJobs(
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }>;
  ping(): Promise<void>;
}

/**
 * A 503 after some items of a batch were written: their jobs must still be queued, so that no
 * written item waits without one. Sending the same request again is safe (and re-queues the
 * jobs of items still pending).
 */
export class PartialWrite extends AppError {
  constructor(
    message: string,
    readonly written: ProcessingJob[],
  ) {
    super('unavailable', message, undefined, 5);
    this.name = 'PartialWrite';
  }
}
