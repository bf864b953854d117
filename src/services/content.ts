import type { ReadinessMemo } from './ready-memo';
import type { Logger } from 'pino';
import { invalid } from '../domain/errors';
import { checkDeleteIds, type ContentWrite, type WriteMode } from '../domain/content';
import type { ListEntry, ProcessingErrorRecord, ProcessingJob, StoredItem } from '../domain/item';
import { LIMITS } from '../domain/limits';
import type { ItemReader } from '../ports/item-reader';
import { PartialWrite, type ItemWriter } from '../ports/item-writer';
import type { JobQueue } from '../ports/job-queue';
import type { AuthService } from './auth';
import type { Principal } from './principal';
import { pageWindow } from './paging';

export class ContentService {
  constructor(
    private readonly store: ItemReader & ItemWriter,
    private readonly queue: JobQueue,
    private readonly auth: AuthService,
    private readonly log: Logger,
    private readonly now: () => number,
    /** Forgotten on every write here: a delete or a url change may take the dataset below it. */
    private readonly ready?: ReadinessMemo,
    /** Told of every write that may take the dataset back to pending (dataset.published). */
    private readonly changed?: (org: string, datasetId: string) => void,
  ) {}

  /**
   * POST (add/replace) or PUT (partial update) of a batch the transport checked whole
   * (parseContentBatch): stored in one transaction, then its images are queued. If queueing
   * fails the items stay pending and the worker's recovery sweep queues them, so an accepted
   * write is never lost.
   */
  async write(
    p: Principal,
    org: string,
    name: string,
    writes: ContentWrite[],
    mode: WriteMode,
  ): Promise<{ accepted: number }> {
    const ds = await this.auth.adminDataset(p, org, name);
    if (mode === 'put') {
      const existing = await this.store.existingIds(
        ds.id,
        writes.map((w) => w.id),
      );
      const details = writes.flatMap((w, index) =>
        existing.has(w.id)
          ? []
          : [{ index, id: w.id, field: 'id', message: 'no item with this id; add it with POST' }],
      );
      if (details.length)
        throw invalid(`${details.length} items do not exist; nothing was stored`, details);
    }
    let jobs: ProcessingJob[];
    try {
      jobs = await this.store.applyWrites(ds.id, writes, mode, this.now());
      this.ready?.forget(ds.id);
    } catch (e) {
      this.ready?.forget(ds.id);
      if (e instanceof PartialWrite) await this.enqueue(ds.id, e.written);
      throw e;
    }
    await this.enqueue(ds.id, jobs);
    this.changed?.(ds.org, ds.id);
    return { accepted: writes.length };
  }

  private async enqueue(datasetId: string, jobs: ProcessingJob[]): Promise<void> {
    try {
      await this.queue.enqueue(jobs);
    } catch (err) {
      this.log.warn(
        { err, dataset: datasetId, jobs: jobs.length },
        'queue unavailable; items stay pending for the recovery sweep',
      );
    }
  }

  async delete(p: Principal, org: string, name: string, ids: readonly string[]): Promise<void> {
    const ds = await this.auth.adminDataset(p, org, name);
    await this.store.deleteItems(ds.id, checkDeleteIds(ids));
    this.ready?.forget(ds.id);
    this.changed?.(ds.org, ds.id);
  }

  async list(
    p: Principal,
    org: string,
    name: string,
    q: { limit?: number; offset?: number },
  ): Promise<ListEntry[]> {
    const ds = await this.auth.adminDataset(p, org, name);
    const { offset, limit } = pageWindow(q, LIMITS.listDefault, 1, LIMITS.listMax);
    return this.store.list(ds.id, offset, limit);
  }

  /**
   * Items by id as stored, private metadata and state included (admin API; GraphQL batches
   * nested item lookups into one call). Unknown ids are absent; order follows `ids`.
   */
  async getItems(p: Principal, org: string, name: string, ids: string[]): Promise<StoredItem[]> {
    const ds = await this.auth.adminDataset(p, org, name);
    if (ids.length > LIMITS.listMax)
      throw invalid(`at most ${LIMITS.listMax} ids per request; got ${ids.length}`, [
        { param: 'ids', message: 'too many ids' },
      ]);
    const found = new Map((await this.store.getItems(ds.id, ids)).map((i) => [i.id, i]));
    return ids.flatMap((id) => (found.has(id) ? [found.get(id)!] : []));
  }

  async errors(
    p: Principal,
    org: string,
    name: string,
    q: { limit?: number; offset?: number },
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }> {
    const ds = await this.auth.adminDataset(p, org, name);
    const { offset, limit } = pageWindow(q, LIMITS.listDefault, 1, LIMITS.listMax);
    return this.store.listErrors(ds.id, offset, limit);
  }
}
