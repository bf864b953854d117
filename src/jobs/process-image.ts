import type { Logger } from 'pino';
import type { ProcessingJob } from '../domain/item';
import { ImageError, MAX_ATTEMPTS } from '../domain/processing';
import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { ImageAnalyzer } from '../ports/image-analyzer';
import type { ImageFetcher } from '../ports/image-fetcher';
import { RetryLater, type JobQueue } from '../ports/job-queue';
import type { UsageLedger } from '../ports/usage-ledger';

export const PROCESS_IMAGE = 'process-image';

/**
 * Downloads an item's image, turns it into features and forgets the bytes. Idempotent: a job
 * whose url is no longer the item's (or that was already done) changes nothing, so redelivery
 * and the recovery sweep are harmless.
 */
export class ProcessImageHandler {
  constructor(
    private readonly store: ContentStore,
    private readonly accounts: AccountStore,
    private readonly ledger: UsageLedger,
    private readonly fetcher: ImageFetcher,
    private readonly analyzer: ImageAnalyzer,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly retryBaseMs: number,
  ) {}

  readonly handle = async (job: ProcessingJob): Promise<void> => {
    const [item] = await this.store.getItems(job.datasetId, [job.itemId]);
    if (!item || item.url !== job.url) return;
    if (item.state === 'processed') {
      // Redelivered after a crash between the result and the count: counting is idempotent.
      await this.countImage(job, item.updatedAt);
      return;
    }
    if (item.state !== 'pending') return;
    const ds = await this.accounts.getDatasetById(job.datasetId);
    const org = ds && (await this.accounts.getOrg(ds.org));
    if (!ds || !org) return;
    const key = { org: ds.org, datasetId: job.datasetId, itemId: job.itemId, url: job.url };
    const images = org.plan.images;
    const limit = images.limitType === 'fixed' ? images.limit : undefined;
    // Only a fixed limit needs a place held before download; unlimited plans just count after.
    if (
      limit !== undefined &&
      !(await this.ledger.reserveImage({ ...key, at: this.now() }, limit))
    ) {
      const year = new Date(this.now()).getUTCFullYear();
      await this.store.markPostponed(
        job,
        {
          code: 'quota_postponed',
          message: `the yearly package of ${limit} images for ${year} is used up; the item is processed when the limit allows`,
          attempts: job.attempt,
        },
        this.now(),
      );
      return;
    }
    try {
      const bytes = await this.fetcher.fetch(job.url);
      const features = await this.analyzer.analyze(bytes);
      const at = this.now();
      if (await this.store.markProcessed(job, features, at))
        await this.ledger.recordImage({ ...key, at });
      else if (limit !== undefined) await this.ledger.releaseImage(key);
    } catch (e) {
      if (limit !== undefined) await this.ledger.releaseImage(key).catch(() => undefined);
      if (!(e instanceof ImageError)) throw e;
      if (e.transient && job.attempt < MAX_ATTEMPTS) {
        const delay = this.retryBaseMs * 4 ** (job.attempt - 1);
        this.log.info({ job, code: e.code, delay }, 'transient image failure; retrying');
        throw new RetryLater(delay, e.message);
      }
      await this.store.markFailed(
        job,
        { code: e.code, message: e.message, attempts: job.attempt },
        this.now(),
      );
    }
  };

  /** One image per successful processing of an item's url (contract §8), never twice. */
  private async countImage(job: ProcessingJob, at: number): Promise<void> {
    const ds = await this.accounts.getDatasetById(job.datasetId);
    if (!ds) return;
    await this.ledger.recordImage({
      org: ds.org,
      datasetId: job.datasetId,
      itemId: job.itemId,
      url: job.url,
      at,
    });
  }
}

/** Re-queues every pending item: covers a crash between the store write and the enqueue. */
export async function requeuePending(
  store: ContentStore,
  queue: JobQueue,
  log: Logger,
): Promise<number> {
  let cursor: string | undefined;
  let total = 0;
  for (;;) {
    const { jobs, next } = await store.pendingJobs(cursor, 1000);
    await queue.enqueue(jobs);
    total += jobs.length;
    if (next === undefined) break;
    cursor = next;
  }
  if (total) log.info({ jobs: total }, 'recovery sweep queued pending items');
  return total;
}
