import type { Logger } from 'pino';
import { statusOf, type DatasetCounts } from '../domain/dataset';
import type { EventOutbox } from '../ports/event-outbox';
import type { WebhookDirectory } from './webhook-directory';

/**
 * Notices a dataset falling back to `pending` (a delete, or a url change that makes processed
 * items pending again), which makes no item facts, so that the batcher announces its next
 * publication (contract §17: dataset.published each time the status becomes published). Only
 * datasets a webhook follows for dataset.published are read. The counts are read once the
 * engine shows the write (`visibilityLagMs`: Elasticsearch refreshes each second, the embedded
 * engine at once), so a dip repaired within that time on Elasticsearch goes unseen.
 */
export class PublicationWatch {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly directory: WebhookDirectory,
    private readonly outbox: EventOutbox,
    private readonly counts: (datasetId: string) => Promise<DatasetCounts>,
    private readonly log: Logger,
    private readonly visibilityLagMs: number,
  ) {}

  /** Items of the dataset were deleted or changed: its status is read again shortly. */
  changed(org: string, datasetId: string): void {
    const check = () =>
      this.check(org, datasetId).catch((err: unknown) =>
        this.log.warn({ err }, 'could not read a dataset status for dataset.published'),
      );
    if (this.visibilityLagMs === 0) {
      void check();
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void check();
    }, this.visibilityLagMs);
    timer.unref();
    this.timers.add(timer);
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

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
