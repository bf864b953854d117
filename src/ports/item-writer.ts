import type { ContentWrite, WriteMode } from '../domain/content';
import { AppError } from '../domain/errors';
import type { ProcessingJob } from '../domain/item';

/** Clients' writes of a dataset's items: content posted, replaced and deleted, datasets dropped. */
export interface ItemWriter {
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
