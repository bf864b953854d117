import type { ContentWrite, WriteMode } from '../../domain/content';
import { applyWrite } from '../../domain/content-write';
import type { ProcessingJob } from '../../domain/item';
import { PartialWrite, type ItemWriter } from '../../ports/item-writer';
import { fromDoc, toDoc } from './document';
import type { FieldCatalogues } from './field-catalogue';
import { CAS_RETRIES, backoff } from './cas';
import { toUnavailable, unavailable } from './outage';
import type { EsIndices } from './indices';
import { ItemIndex, type Hit } from './item-index';
import { Refresher } from './refresher';
import { storedCounts, type StoredCounts } from './item-counts';

type BulkResult = { status: number; error?: { type: string; reason?: string | null } };

/** ItemWriter on Elasticsearch: clients' writes of items (POST/PUT/DELETE content, dataset deletion). */
export class EsItemWriter extends ItemIndex implements ItemWriter {
  /** A client's writes are searchable when answered; the index itself refreshes every second. */
  private readonly refresher = new Refresher(() => this.client);

  constructor(
    indices: EsIndices,
    private readonly catalogues: FieldCatalogues,
    /** Dimensions of the embedder's vectors: an index this host creates has their field. */
    private readonly vectorDims: number,
  ) {
    super(indices);
  }

  /**
   * Read, apply, write with optimistic concurrency (`if_seq_no`, or create-only for a new id);
   * the ids another writer changed in between are read and applied again after a jittered
   * pause. A dataset without an index gets one here (create-if-absent: another host may be
   * creating it at the same moment), whoever deleted it before.
   */
  async applyWrites(
    datasetId: string,
    writes: ContentWrite[],
    mode: WriteMode,
    now: number,
  ): Promise<ProcessingJob[]> {
    // Duplicate ids in one batch apply in order: fold them into one write per id first.
    const byId = new Map<string, ContentWrite[]>();
    for (const w of writes) byId.set(w.id, [...(byId.get(w.id) ?? []), w]);
    const jobs = new Map<string, ProcessingJob>();
    const written = new Set<string>();
    // Sent in a bulk whose answer never came (a timeout, a dropped connection): perhaps written.
    const unknown = new Set<string>();
    let pending = [...byId.keys()];
    try {
      for (let attempt = 0; pending.length && attempt < CAS_RETRIES; attempt++) {
        if (attempt) await backoff(attempt);
        // New ids start from counts rolled up before they were pushed: read beside the items.
        const [{ hits, indexMissing }, counts] = await Promise.all([
          this.mget(datasetId, pending),
          storedCounts(this.indices, datasetId, pending),
        ]);
        // The read found no index: create it, then every id is new (a create-only write, so
        // a concurrent host's first writes to the same ids conflict and are read again).
        if (indexMissing) await this.indices.createItems(datasetId, this.vectorDims);
        const current = new Map(hits.map((h) => [h._id, h]));
        const ops: unknown[] = [];
        const planned: string[] = [];
        for (const id of pending) {
          const op = this.plan(datasetId, id, byId.get(id)!, current.get(id), mode, now, counts);
          if (!op) continue;
          ops.push(...op.ops);
          planned.push(id);
          if (op.job) jobs.set(id, op.job);
          else jobs.delete(id);
        }
        if (!ops.length) break;
        const r = await this.client.bulk({ operations: ops as never[] }).catch((e: unknown) => {
          for (const id of planned) unknown.add(id);
          throw e;
        });
        const results = r.items.map((it) => it.index ?? it.create);
        results.forEach((res, i) => {
          if (res && !res.error) written.add(planned[i]!);
        });
        pending = await this.retryable(datasetId, planned, results);
      }
      // Inside the try: the items written in earlier rounds still get their jobs (PartialWrite).
      if (pending.length)
        throw unavailable(
          `items changed concurrently too often: ${pending.slice(0, 5).join(', ')}`,
          1,
        );
      if (written.size) await this.refresher.visible(this.index(datasetId));
    } catch (e) {
      // Whatever failed (a refusal, a lost connection on a later round), what was written
      // must still get its jobs, and so must what may have been: a job for an item that was
      // not written finds nothing to do.
      if (!written.size && !unknown.size) throw e;
      const done = [...jobs.values()].filter((j) => written.has(j.itemId) || unknown.has(j.itemId));
      throw new PartialWrite((toUnavailable(e) ?? (e as Error)).message, done);
    } finally {
      this.catalogues.invalidate(datasetId);
    }
    return [...jobs.values()];
  }

  /** The bulk operation for one id (undefined when nothing changes) and its processing job. */
  private plan(
    datasetId: string,
    id: string,
    writes: ContentWrite[],
    hit: Hit | undefined,
    mode: WriteMode,
    now: number,
    counts: Map<string, StoredCounts>,
  ): { ops: unknown[]; job?: ProcessingJob } | undefined {
    let item = hit?._source ? fromDoc(hit._source) : undefined;
    const isNew = !item;
    let needsJob = false;
    let urlChanged = false;
    for (const w of writes) {
      const out = applyWrite(item, w, mode, now);
      if (!out) continue;
      item = out.item;
      needsJob = out.needsJob;
      urlChanged ||= out.urlChanged;
    }
    if (!item) return undefined;
    const known = counts.get(id);
    if (isNew && known) item = { ...item, counts: known };
    const error = urlChanged ? null : (hit?._source?.error ?? null);
    const _index = this.index(datasetId);
    const action = hit
      ? {
          index: { _index, _id: id, if_seq_no: hit._seq_no, if_primary_term: hit._primary_term },
        }
      : { create: { _index, _id: id } };
    return {
      ops: [action, toDoc(datasetId, item, error, hit?._source)],
      ...(needsJob ? { job: { datasetId, itemId: id, url: item.url, attempt: 1 } } : {}),
    };
  }

  /**
   * The ids to write again: version conflicts, and writes that found no index (a cluster that
   * does not create indices on write; the index is created first). Any other refusal is a 503:
   * the items before it in the batch may be written, and sending the same request again is
   * safe, since applying the same writes twice leaves the same items.
   */
  private async retryable(
    datasetId: string,
    planned: string[],
    results: (BulkResult | undefined)[],
  ): Promise<string[]> {
    const again: string[] = [];
    const refused: string[] = [];
    let indexMissing = false;
    results.forEach((res, i) => {
      if (!res?.error) return;
      if (res.status === 409) again.push(planned[i]);
      else if (res.error.type === 'index_not_found_exception') {
        indexMissing = true;
        again.push(planned[i]);
      } else refused.push(`'${planned[i]}' (${res.error.reason ?? res.error.type})`);
    });
    if (refused.length)
      throw unavailable(
        `the search engine refused ${refused.length} of ${planned.length} items, first ${refused[0]}; ` +
          'the others may be written already — sending the same request again is safe',
      );
    if (indexMissing) await this.indices.createItems(datasetId, this.vectorDims);
    return again;
  }

  async deleteItems(datasetId: string, ids: string[]): Promise<number> {
    if (!ids.length) return 0;
    // Deletes never create an index: on a missing one each answers index_not_found.
    const r = await this.client.bulk({
      operations: ids.map((id) => ({ delete: { _index: this.index(datasetId), _id: id } })),
    });
    await this.refresher.visible(this.index(datasetId));
    this.catalogues.invalidate(datasetId);
    const failed = r.items
      .map((i) => i.delete)
      .find((d) => d?.error && d.error.type !== 'index_not_found_exception');
    if (failed)
      throw unavailable(
        `the search engine could not delete item '${failed._id}' (${failed.error!.reason ?? failed.error!.type}); sending the same request again is safe`,
      );
    return r.items.filter((i) => i.delete?.result === 'deleted').length;
  }

  async dropDataset(datasetId: string): Promise<void> {
    await this.client.indices.delete({ index: this.index(datasetId) }, { ignore: [404] });
    this.catalogues.invalidate(datasetId);
  }
}
