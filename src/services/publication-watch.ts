import type { Logger } from 'pino';
import { statusOf, type DatasetCounts } from '../domain/dataset';
import type { EventOutbox } from '../ports/event-outbox';
import type { WebhookDirectory } from './webhook-directory';

/**
 * Notices a dataset falling back to `pending` (a delete, or a url change that makes processed
 * items pending again), which makes no item facts, so that the batcher announces its next
 * publication (contract §17: dataset.published each time the status becomes published). Only
 * datasets a webhook follows for dataset.published are read, right after the write: a client
 * write is searchable when it is answered (contract §4), so the counts include it.
 */
export class PublicationWatch {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly directory: WebhookDirectory,
    private readonly outbox: EventOutbox,
    private readonly counts: (datasetId: string) => Promise<DatasetCounts>,
    private readonly log: Logger,
  ) {}

  /** Items of the dataset were deleted or changed: its status is read again, not awaited. */
  changed(org: string, datasetId: string): void {
    const p = this.check(org, datasetId)
      .catch((err: unknown) =>
        this.log.warn({ err }, 'could not read a dataset status for dataset.published'),
      )
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }

  async check(org: string, datasetId: string): Promise<void> {
    if (!(await this.directory.wanting(org, 'dataset.published', datasetId)).length) return;
    if (statusOf(await this.counts(datasetId)) !== 'pending') return;
    const seen = await this.outbox.seenStatus(datasetId);
    if (seen?.status !== 'published') return;
    await this.outbox.setSeenStatus(
      datasetId,
      { status: 'pending', epoch: seen.epoch + 1 },
      seen.epoch,
    );
  }

  async drain(): Promise<void> {
    await Promise.all(this.running);
  }
}
