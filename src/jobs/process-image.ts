import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics';
import type { ProcessingJob, StoredItem } from '../domain/item';
import type { Allowance } from '../domain/plan';
import {
  ImageError,
  MAX_ATTEMPTS,
  type ImageFeatures,
  type ProcessingFailure,
} from '../domain/processing';
import type { AccountStore } from '../ports/account-store';
import type { ItemProcessing } from '../ports/item-processing';
import type { ItemReader } from '../ports/item-reader';
import type { ImageAnalyzer } from '../ports/image-analyzer';
import type { ImageFetcher } from '../ports/image-fetcher';
import type { ActiveProjection } from '../ports/search-engine';
import { Defer, RetryLater, type JobQueue } from '../ports/job-queue';
import type { ImageKey, UsageLedger } from '../ports/usage-ledger';
import { settlementFor } from '../domain/retry-rule';
import type { PlanReads } from '../services/plans';
import { SlotsClosed, type Slots } from '../lib/slots';
import { deferDelayMs, type FairShare } from './fair-share';
import type { ItemOutcome, OutcomeSink } from './item-outcomes';

/** The store writes that record a job's outcome, run once its image slot is given back. */
type Recording = () => Promise<void>;

/** What a worker's image job needs; `imageSlots` is WORKER_CONCURRENCY. */
export interface ImageJobDeps {
  /** Reads the item and its kept embedding; records the job's outcome. */
  store: ItemReader & ItemProcessing;
  accounts: AccountStore;
  /** Plans as this process read them in the last second (shared with metering). */
  plans: PlanReads;
  ledger: UsageLedger;
  fetcher: ImageFetcher;
  analyzer: ImageAnalyzer;
  log: Logger;
  now: () => number;
  retryBaseMs: number;
  /** The analyzer's embedder: items embedded by another one are re-embedded. */
  embedderId: string;
  fair: FairShare;
  /** Jobs downloading or being analysed at once. */
  imageSlots: Slots;
  metrics?: Metrics;
  /** Told of each processed or failed item before its job is acknowledged (events out). */
  outcomes?: OutcomeSink;
  /** The dataset's active projection as this process read it a moment ago, if tuning is on. */
  tuning?: (datasetId: string) => Promise<ActiveProjection | undefined>;
}

/**
 * Downloads an item's image, turns it into features and forgets the bytes. Idempotent: a job
 * whose url is no longer the item's (or that was already done) changes nothing, so redelivery
 * and the recovery sweep are harmless.
 */
export class ProcessImageHandler {
  constructor(private readonly deps: ImageJobDeps) {}

  /**
   * Jobs a worker should hold (the queue's prefetch): twice its image slots, since a job whose
   * outcome is being stored has given its slot to the next, and the analyser would otherwise
   * wait behind store writes.
   */
  get jobsInHand(): number {
    return 2 * this.deps.imageSlots.size;
  }

  /** Datasets never change organisation: remembered, so a job can step aside without a read. */
  private readonly orgOfDataset = new Map<string, string>();
  readonly handle = async (job: ProcessingJob): Promise<void> => {
    try {
      await this.handleOnce(job);
    } catch (e) {
      this.countSettlement(e, job);
      throw e;
    }
  };

  /**
   * Every job the queue runs again is counted, whatever threw (a store read before the
   * download as much as the image): `retried`, or `failed` when the queue parks it as dead.
   * A fair-share deferral is not an outcome: the job has not run.
   */
  private countSettlement(e: unknown, job: ProcessingJob): void {
    const kind = settlementFor(e, job.attempt, 0).kind;
    if (kind === 'retry' || kind === 'wait')
      this.deps.metrics?.imageJobs.inc({ outcome: 'retried' });
    else if (kind === 'dead') this.deps.metrics?.imageJobs.inc({ outcome: 'failed' });
  }

  /**
   * The image work (reads, download, analysis) holds one of WORKER_CONCURRENCY image slots and,
   * for the download, a fair share; the store writes that record its outcome run after both
   * are given back, so a result waiting to share a write never keeps the next image waiting.
   */
  private readonly handleOnce = async (job: ProcessingJob): Promise<void> => {
    const orgName = await this.orgOf(job.datasetId);
    if (orgName === undefined) return; // the dataset is gone, and its items with it
    // Read before waiting for a slot: jobs handed over together share one read (a realtime
    // mget on Elasticsearch). The result's write is versioned, so a change meanwhile is seen.
    const [item] = await this.deps.store.getItems(job.datasetId, [job.itemId], { latest: true });
    if (!item || item.url !== job.url) return;
    if (item.state !== 'pending' && item.state !== 'processed') return;
    const version = item.updatedAt;
    // Seen while it waits for a slot: another tenant's jobs already waiting step aside for it.
    this.deps.fair.noteWaiting(orgName);
    let record: Recording | undefined;
    const endImage = await this.deps.imageSlots.acquire().catch((e: unknown) => {
      // stopping: the job goes back to the queue untouched, for another worker
      if (e instanceof SlotsClosed) throw new Defer(0);
      throw e;
    });
    try {
      const slot = this.deps.fair.tryAcquire(new URL(job.url).host, orgName);
      if (!slot) throw new Defer(deferDelayMs(job.deferrals ?? 0));
      try {
        record = await this.run(job, item, orgName, slot, version);
      } finally {
        slot();
      }
    } finally {
      endImage();
    }
    await record?.();
  };

  /** Jobs still waiting for an image slot go back to the queue; those holding one finish. */
  stop(): void {
    this.deps.imageSlots.close();
  }

  private async orgOf(datasetId: string): Promise<string | undefined> {
    const known = this.orgOfDataset.get(datasetId);
    if (known !== undefined) return known;
    const ds = await this.deps.accounts.getDatasetById(datasetId);
    if (!ds) return undefined;
    if (this.orgOfDataset.size >= 10_000) this.orgOfDataset.clear();
    this.orgOfDataset.set(datasetId, ds.org);
    return ds.org;
  }

  private async run(
    job: ProcessingJob,
    item: StoredItem,
    orgName: string,
    endDownload: () => void,
    version: number,
  ): Promise<Recording | undefined> {
    if (item.state === 'processed') {
      const embedding = await this.deps.store.getEmbedding(job.datasetId, job.itemId, {
        latest: true,
      });
      const reembedded =
        embedding && embedding.embedder !== this.deps.embedderId
          ? await this.reembed(job, endDownload)
          : undefined;
      return async () => {
        // Redelivered after a crash between the result and the count
        await this.countAndTell(job, orgName, item);
        await reembedded?.();
      };
    }
    return this.process(job, orgName, endDownload, version);
  }

  /** Only a fixed limit needs a place held before download; unlimited plans just count after. */
  private admit(key: ImageKey & { org: string }, at: number, images: Allowance): Promise<boolean> {
    if (images.limitType !== 'fixed') return Promise.resolve(true);
    return this.deps.ledger.reserveImage({ ...key, at }, images.limit);
  }

  private async process(
    job: ProcessingJob,
    orgName: string,
    endDownload: () => void,
    version: number,
  ): Promise<Recording | undefined> {
    const key = { org: orgName, datasetId: job.datasetId, itemId: job.itemId, url: job.url };
    const reservedAt = this.deps.now();
    let images = (await this.deps.plans.get(orgName))?.plan.images;
    if (!images) return undefined;
    let admitted = await this.admit(key, reservedAt, images);
    if (!admitted) {
      // The refusal rested on a plan read up to PLAN_TTL_MS ago: a limit raised since (and the
      // sweep that queued this job again) must not postpone it once more. Asked again only when
      // the plan did change: a refusal is a count of the year's images, not a cheap check.
      const fresh = (await this.deps.plans.fresh(orgName))?.plan.images;
      if (!fresh) return undefined;
      if (fresh.limitType !== images.limitType || fresh.limit !== images.limit) {
        images = fresh;
        admitted = await this.admit(key, reservedAt, images);
      }
    }
    const limit = images.limitType === 'fixed' ? images.limit : undefined;
    if (!admitted) {
      const year = new Date(this.deps.now()).getUTCFullYear();
      const failure: ProcessingFailure = {
        code: 'quota_postponed',
        message: `the yearly package of ${limit} images for ${year} is used up; the item is processed when the limit allows`,
        attempts: job.attempt,
      };
      return async () => void (await this.deps.store.markPostponed(job, failure, this.deps.now()));
    }
    const release = async (): Promise<void> => {
      if (limit !== undefined) await this.deps.ledger.releaseImage({ ...key, at: reservedAt });
    };
    const timer = this.deps.metrics?.imageJobDuration.startTimer();
    const outcome = await this.deps.fetcher
      .fetch(job.url)
      .finally(endDownload)
      .then((bytes) => this.deps.analyzer.analyze(bytes))
      .then(
        (features) => ({ features }),
        (error: unknown) => ({ error }),
      );
    return async () => {
      try {
        if ('error' in outcome)
          await this.recordFailure(job, orgName, outcome.error, release, version);
        else await this.recordResult(job, key, outcome.features, limit !== undefined, release);
      } finally {
        timer?.();
      }
    };
  }

  /** The image could not be had: the held place is given back, and the failure recorded. */
  private async recordFailure(
    job: ProcessingJob,
    org: string,
    e: unknown,
    release: () => Promise<void>,
    version: number,
  ): Promise<void> {
    await release().catch(() => undefined);
    this.retryIfTransient(e, job);
    // Told before it is stored: a failure stored and then not told (a crash between) could
    // never be told again, since a redelivered job leaves a failed item alone.
    await this.tell(job, org, 'failed', version, { code: e.code, message: e.message });
    await this.deps.store.markFailed(
      job,
      { code: e.code, message: e.message, attempts: job.attempt },
      this.deps.now(),
    );
    this.deps.metrics?.imageJobs.inc({ outcome: 'failed' });
  }

  /** The features, then the image's count; a result that could not be stored frees its place. */
  private async recordResult(
    job: ProcessingJob,
    key: ImageKey & { org: string },
    features: ImageFeatures,
    held: boolean,
    release: () => Promise<void>,
  ): Promise<void> {
    try {
      // a projection that cannot be read now is left to the tuning pass
      const tuning = await this.deps.tuning?.(job.datasetId).catch(() => undefined);
      const at = this.deps.now();
      if (await this.deps.store.markProcessed(job, features, at, tuning)) {
        // together, so that a store can write both in one request; each is idempotent, and
        // the job is redelivered unless both are durable
        await Promise.all([
          this.deps.ledger.recordImage({ ...key, at, processedAt: at, held }),
          this.tell(job, key.org, 'processed', at),
        ]);
        this.deps.metrics?.imageJobs.inc({ outcome: 'processed' });
      } else await this.countIfDone(job, key.org, release);
    } catch (e) {
      await release().catch(() => undefined);
      throw e;
    }
  }

  /**
   * The result was not recorded because the item is already processed from this url: by another
   * delivery of this job, or by this very attempt whose write succeeded although its answer was
   * lost (an Elasticsearch node died mid-request and the client sent it again, which then
   * conflicted with itself). Either way that processing must be counted, and counting is
   * idempotent per processing; otherwise the job is stale and its place is given back.
   */
  private async countIfDone(
    job: ProcessingJob,
    org: string,
    release: () => Promise<void>,
  ): Promise<void> {
    const [item] = await this.deps.store.getItems(job.datasetId, [job.itemId], { latest: true });
    if (item?.state === 'processed' && item.url === job.url) {
      await this.countAndTell(job, org, item);
      return;
    }
    await release();
  }

  /**
   * Rethrows what is not an image failure, and a transient one as a delayed retry (backoff ×4)
   * while attempts remain; returns for a failure to record.
   */
  private retryIfTransient(e: unknown, job: ProcessingJob): asserts e is ImageError {
    if (!(e instanceof ImageError)) throw e;
    if (e.transient && job.attempt < MAX_ATTEMPTS) {
      const delay = this.deps.retryBaseMs * 4 ** (job.attempt - 1);
      this.deps.log.info({ job, code: e.code, delay }, 'transient image failure; retrying');
      throw new RetryLater(delay, e.message);
    }
  }

  /**
   * The embedder changed since the item was processed: fetch the image again for a new vector.
   * Not a new image for metering (same url), and a failure leaves the item searchable, only
   * without a vector (recorded, so sweeps do not fetch it forever).
   */
  private async reembed(job: ProcessingJob, endDownload: () => void): Promise<Recording> {
    let vector: number[] = [];
    let pixelHash: string | undefined;
    let copySignature: string | undefined;
    try {
      const bytes = await this.deps.fetcher.fetch(job.url).finally(endDownload);
      ({ vector, pixelHash, copySignature } = await this.deps.analyzer.analyze(bytes));
    } catch (e) {
      this.retryIfTransient(e, job);
      this.deps.log.warn(
        { job, code: e.code, reason: e.message },
        'could not re-embed an item after the embedder changed; it is left out of similarity',
      );
    }
    return async () =>
      void (await this.deps.store.markEmbedded(job, {
        vector,
        embedder: this.deps.embedderId,
        ...(pixelHash ? { pixelHash } : {}),
        ...(copySignature ? { copySignature } : {}),
      }));
  }

  private async tell(
    job: ProcessingJob,
    org: string,
    kind: ItemOutcome['kind'],
    version: number,
    error?: ItemOutcome['error'],
  ): Promise<void> {
    if (!this.deps.outcomes) return;
    const { datasetId, itemId, url } = job;
    const outcome = { org, datasetId, itemId, url, kind, at: this.deps.now(), version };
    await this.deps.outcomes.record(error ? { ...outcome, error } : outcome);
  }

  /**
   * One image per successful processing of an item's url (contract §8), never twice. `org` is
   * the dataset's, as the job found it (a dataset never changes organisation).
   */
  /**
   * An item found processed already: its count and its outcome, either of which a crash may have
   * lost, again under the names of that processing, so neither is counted or told twice: the
   * item's processedAt (0 for items processed before it was recorded, as their ledger rows say;
   * its updatedAt names the outcome then). Together, as recordResult does.
   */
  private async countAndTell(job: ProcessingJob, org: string, item: StoredItem): Promise<void> {
    await Promise.all([
      this.deps.ledger.recordImage({
        org,
        datasetId: job.datasetId,
        itemId: job.itemId,
        url: job.url,
        at: item.updatedAt,
        processedAt: item.image?.processedAt ?? 0,
      }),
      this.tell(job, org, 'processed', item.image?.processedAt ?? item.updatedAt),
    ]);
  }
}

type JobPage = (
  cursor: string | undefined,
  limit: number,
) => Promise<{ jobs: ProcessingJob[]; next?: string }>;

async function requeueAll(page: JobPage, queue: JobQueue): Promise<number> {
  let cursor: string | undefined;
  let total = 0;
  for (;;) {
    const { jobs, next } = await page(cursor, 1000);
    await queue.enqueue(jobs);
    total += jobs.length;
    if (next === undefined) break;
    cursor = next;
  }
  return total;
}

/**
 * Re-queues every pending item (covers a crash between the store write and the enqueue) and
 * every processed item whose embedding is not the current embedder's (an embedder change).
 */
export async function requeueUnfinished(
  store: ItemProcessing,
  queue: JobQueue,
  log: Logger,
  embedderId: string,
): Promise<number> {
  const pending = await requeueAll((c, n) => store.pendingJobs(c, n), queue);
  if (pending) log.info({ jobs: pending }, 'recovery sweep queued pending items');
  const stale = await requeueAll((c, n) => store.staleEmbeddings(embedderId, c, n), queue);
  if (stale)
    log.info({ jobs: stale, embedder: embedderId }, 'recovery sweep queued items to re-embed');
  return pending + stale;
}
