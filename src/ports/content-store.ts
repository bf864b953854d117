import type { ContentWrite, WriteMode } from '../domain/content';
import type { DatasetCounts } from '../domain/dataset';
import type { ListEntry, ProcessingErrorRecord, ProcessingJob, StoredItem } from '../domain/item';
import type { ImageFeatures, ProcessingFailure } from '../domain/processing';
import type { FieldCatalogue } from '../query/resolve';

/** Items of a dataset and their processing state. */
export interface ContentStore {
  /** Ids of `ids` that exist in the dataset. */
  existingIds(datasetId: string, ids: string[]): Promise<Set<string>>;
  /**
   * Applies validated writes atomically and durably (all or none) and returns the images
   * that now need processing.
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
  getItems(datasetId: string, ids: string[]): Promise<StoredItem[]>;
  counts(datasetId: string): Promise<DatasetCounts>;
  catalogue(datasetId: string): Promise<FieldCatalogue>;
  /** Public and generated field names, for content/fields `*`. */
  publicFields(datasetId: string): Promise<string[]>;

  /** Records features only if the item still has this url; false when the job was stale. */
  markProcessed(job: ProcessingJob, features: ImageFeatures, now: number): Promise<boolean>;
  markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean>;
  /** The embedding of a processed item; undefined when it is unknown or not processed. */
  getVector(datasetId: string, id: string): Promise<number[] | undefined>;
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
