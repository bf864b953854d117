import { errors } from '@elastic/elasticsearch';
import type { ProcessingJob } from '../../domain/item';
import type { ImageFeatures, ProcessingFailure } from '../../domain/processing';
import type { ItemProcessing, JobPage } from '../../ports/item-processing';
import type { ActiveProjection } from '../../ports/search-engine';
import {
  docVector,
  fromDoc,
  projectedFields,
  refusesBlendField,
  toDoc,
  withoutTuning,
  type ItemDoc,
} from './document';
import { staleQuery } from './dsl';
import { CAS_RETRIES, backoff } from './cas';
import { unavailable } from './outage';
import { GroupedCas } from './grouped-cas';
import { isConflict, type EsIndices } from './indices';
import { ItemIndex, isIndexMissing, orEmpty } from './item-index';
import type { KnownVersions } from './known-versions';
import { vectorMapping } from './mapping';

/** The strict item mapping refused a document because it has a field the index lacks. */
const isUnmappedField = (e: unknown): boolean =>
  e instanceof errors.ResponseError &&
  e.statusCode === 400 &&
  [e.body?.error?.type, e.body?.error?.caused_by?.type].includes(
    'strict_dynamic_mapping_exception',
  );

/**
 * ItemProcessing on Elasticsearch. Workers' results: processed, embedded, failed, postponed.
 * Each is a compare-and-swap on the item, so a job for an old url can never overwrite the result
 * for a newer one. The recovery sweeps' job pages walk every item index.
 *
 * Vectors of each size live in a field of their own (vectorField), which the strict item
 * mapping must declare before a vector of that size is written. Two steps see to it, and no
 * host remembers which index has which field:
 * - once per process, before its first vector write, the field for this embedder's size is
 *   added to every item index that exists then (indices made for another size lack it);
 * - an index created afterwards by this host has the field from the start (createItems), but
 *   one created afterwards by a host whose embedder has another size does not. Its strict
 *   mapping refuses the write; the field is then added to that index and the write tried
 *   again. Two hosts adding the same field at once is harmless (the same definition is a
 *   no-op), and so is adding it to an index that was created with it a moment before.
 */
export class EsItemProcessing extends ItemIndex implements ItemProcessing {
  private vectorFieldReady: Promise<void> | undefined;
  private readonly grouped = new GroupedCas(() => this.client);

  constructor(
    indices: EsIndices,
    private readonly vectorDims: number,
    /** Items as this process's workers just read them (EsItemReader): written without a read. */
    private readonly known?: KnownVersions,
  ) {
    super(indices);
  }

  async markProcessed(
    job: ProcessingJob,
    f: ImageFeatures,
    now: number,
    tuning?: ActiveProjection,
  ): Promise<boolean> {
    await this.prepareVectorField();
    // with the dataset's projection, so that the item ranks in the one kNN by the blend at once
    const tuned =
      tuning && f.vector.length === tuning.projection.dims
        ? projectedFields(tuning, Float32Array.from(f.vector))
        : {};
    return this.casUpdate(job, (d) => {
      if (d.url !== job.url || d.state === 'processed') return undefined;
      const item = fromDoc(d);
      const doc = toDoc(
        job.datasetId,
        {
          ...item,
          state: 'processed',
          image: {
            width: f.width,
            height: f.height,
            url: job.url,
            processedAt: now,
            ...(f.pixelHash ? { pixelHash: f.pixelHash } : {}),
            ...(f.copySignature ? { copySignature: f.copySignature } : {}),
          },
        },
        null,
        { vector: f.vector, embedder: f.embedder },
      );
      return { ...doc, ...tuned };
    });
  }

  async markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string; pixelHash?: string; copySignature?: string },
  ): Promise<boolean> {
    await this.prepareVectorField();
    return this.casUpdate(job, (d) => {
      if (d.url !== job.url || d.state !== 'processed') return undefined;
      const item = fromDoc(d);
      // the hash names the decode for the embedder: a new embedder's decode gets its own
      if (item.image && embedding.pixelHash) item.image.pixelHash = embedding.pixelHash;
      if (item.image && embedding.copySignature) item.image.copySignature = embedding.copySignature;
      return toDoc(job.datasetId, item, d.error ?? null, embedding);
    });
  }

  async markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return this.casUpdate(job, (d) => {
      if (d.url !== job.url || d.state !== 'pending') return undefined;
      return toDoc(
        job.datasetId,
        { ...fromDoc(d), state: 'failed' },
        { ...failure, url: job.url, occurred_at: new Date(now).toISOString() },
      );
    });
  }

  async markPostponed(
    job: ProcessingJob,
    failure: ProcessingFailure,
    now: number,
  ): Promise<boolean> {
    return this.casUpdate(job, (d) => {
      if (d.url !== job.url || d.state !== 'pending') return undefined;
      return toDoc(job.datasetId, fromDoc(d), {
        ...failure,
        url: job.url,
        occurred_at: new Date(now).toISOString(),
      });
    });
  }

  /**
   * Read, check, write with if_seq_no; a conflict (another writer in between) reads again after
   * a jittered pause. An item whose index no longer exists reads as absent: no change.
   */
  private async casUpdate(
    job: ProcessingJob,
    change: (doc: ItemDoc) => ItemDoc | undefined,
  ): Promise<boolean> {
    // First with whatever other results are being stored now; alone if that did not settle it.
    const index = this.index(job.datasetId);
    const grouped = await this.grouped.submit(
      index,
      job.itemId,
      change,
      this.known?.take(index, job.itemId),
    );
    if (grouped !== 'retry') return grouped === 'written';
    let fieldAdded = false;
    /** The index has no blend field for the projection: the pass writes it (and maps it). */
    let untuned = false;
    for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
      if (attempt) await backoff(attempt);
      const [hit] = (await this.mget(job.datasetId, [job.itemId])).hits;
      const changed = hit?._source && change(hit._source);
      if (!changed) return false;
      const next = untuned ? withoutTuning(changed) : changed;
      try {
        await this.client.index({
          index: this.index(job.datasetId),
          id: job.itemId,
          document: next,
          if_seq_no: hit._seq_no,
          if_primary_term: hit._primary_term,
          // No wait_for: it would cap a worker at one result per refresh. Counts, search,
          // details and errors all read the refreshed view,
          // so a client never sees an item counted as processed but missing from search.
        });
        return true;
      } catch (e) {
        if (isConflict(e)) continue;
        // deleted since the read (item indices are never created by a write): nothing to change
        if (isIndexMissing(e)) return false;
        if (!untuned && isUnmappedField(e) && refusesBlendField((e as errors.ResponseError).body)) {
          untuned = true;
          continue;
        }
        const dims = docVector(next)?.length;
        if (fieldAdded || !dims || !isUnmappedField(e)) throw e;
        // An index created by a host with another embedder size: give it this size's field.
        await this.putVectorField(this.index(job.datasetId), dims);
        fieldAdded = true;
      }
    }
    throw unavailable(`item '${job.itemId}' changed concurrently too often`, 1);
  }

  async staleEmbeddingCount(datasetId: string, embedder: string): Promise<number> {
    return orEmpty(
      async () =>
        (await this.client.count({ index: this.index(datasetId), query: staleQuery(embedder) }))
          .count,
      0,
    );
  }

  async pendingJobs(cursor: string | undefined, limit: number): Promise<JobPage> {
    return this.jobsMatching({ term: { state: 'pending' } }, cursor, limit);
  }

  async staleEmbeddings(
    embedder: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<JobPage> {
    return this.jobsMatching(staleQuery(embedder), cursor, limit);
  }

  /** Items of every dataset matching `query`, as jobs, paged with search_after. */
  private async jobsMatching(
    query: unknown,
    cursor: string | undefined,
    limit: number,
  ): Promise<JobPage> {
    const r = await this.client.search<ItemDoc>(
      {
        index: this.indices.allItems,
        query: query as never,
        sort: [{ dataset: 'asc' }, { id: 'asc' }],
        size: limit,
        _source: ['dataset', 'id', 'url'],
        ...(cursor ? { search_after: JSON.parse(cursor) as never[] } : {}),
      },
      { ignore: [404] },
    );
    const hits = r.hits?.hits ?? [];
    return {
      jobs: hits.map((h) => ({
        datasetId: h._source!.dataset,
        itemId: h._source!.id,
        url: h._source!.url,
        attempt: 1,
      })),
      ...(hits.length === limit ? { next: JSON.stringify(hits[hits.length - 1].sort) } : {}),
    };
  }

  private prepareVectorField(): Promise<void> {
    // Once per process, before the first vector write; retried after a failure.
    this.vectorFieldReady ??= this.putVectorField(this.indices.allItems, this.vectorDims).catch(
      (e: unknown) => {
        this.vectorFieldReady = undefined;
        throw e;
      },
    );
    return this.vectorFieldReady;
  }

  private async putVectorField(index: string, dims: number): Promise<void> {
    try {
      await this.client.indices.putMapping({
        index,
        // none yet, or deleted meanwhile by another host: nothing to add the field to
        allow_no_indices: true,
        ignore_unavailable: true,
        properties: vectorMapping(dims) as never,
      });
    } catch (e) {
      if (e instanceof errors.ResponseError && e.statusCode === 400)
        throw new Error(
          `Elasticsearch: cannot add the ${dims}-dimension vector field to the indices ${index}: ${e.message}`,
          { cause: e },
        );
      throw e;
    }
  }
}
