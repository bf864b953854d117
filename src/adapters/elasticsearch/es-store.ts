import { Client, errors } from '@elastic/elasticsearch';
import type { ContentWrite, WriteMode } from '../../domain/content';
import { applyWrite } from '../../domain/content-write';
import type { DatasetCounts } from '../../domain/dataset';
import { AppError } from '../../domain/errors';
import type {
  ListEntry,
  ProcessingErrorRecord,
  ProcessingJob,
  StoredItem,
} from '../../domain/item';
import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../../domain/limits';
import type { ValueKind } from '../../domain/metadata';
import type { ImageFeatures, ProcessingFailure } from '../../domain/processing';
import type { ContentStore, StoredEmbedding } from '../../ports/content-store';
import type {
  Facets,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  SimilarRequest,
} from '../../ports/search-engine';
import type { Condition } from '../../query/ast';
import type { FieldCatalogue } from '../../query/resolve';
import { docVector, fromDoc, toDoc, type ItemDoc } from './document';
import { catalogueBody, facetsBody, knnBody, sampleBody, searchBody } from './dsl';
import { ITEM_SETTINGS, itemMapping, vectorMapping } from './mapping';

/** Optimistic-concurrency retries before a write gives up with 503. */
const CAS_RETRIES = 8;
const CATALOGUE_TTL_MS = 2000;
/** GET content pages past this window walk the index with search_after. */
const WINDOW = 10_000;

type Hit = {
  _id: string;
  _source?: ItemDoc;
  _seq_no?: number;
  _primary_term?: number;
  sort?: unknown[];
};

const chunks = <T>(xs: T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

/** Transport failures become 503s naming what to check; anything else stays a bug (500). */
async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (
      e instanceof errors.ConnectionError ||
      e instanceof errors.TimeoutError ||
      e instanceof errors.NoLivingConnectionsError
    )
      throw new AppError(
        'unavailable',
        'the search engine is unreachable; try again shortly',
        undefined,
        5,
      );
    if (e instanceof errors.ResponseError && (e.statusCode === 429 || e.statusCode === 503))
      throw new AppError(
        'unavailable',
        'the search engine is overloaded; try again shortly',
        undefined,
        5,
      );
    throw e;
  }
}

/** ContentStore and SearchEngine on Elasticsearch 8: one index per dataset. */
export class ElasticsearchStore implements ContentStore, SearchEngine {
  private readonly known = new Set<string>();
  private readonly catalogues = new Map<
    string,
    { at: number; scopes: string; value: Map<string, Set<ValueKind>> }
  >();

  constructor(
    readonly client: Client,
    private readonly prefix: string,
    private readonly now: () => number,
    /** Dimensions of the embedder's vectors; fixed per index. */
    private readonly vectorDims: number,
  ) {}

  index(datasetId: string): string {
    return `${this.prefix}items-${datasetId}`;
  }

  private async ensureIndex(datasetId: string): Promise<string> {
    const index = this.index(datasetId);
    if (this.known.has(index)) return index;
    try {
      await this.client.indices.create({
        index,
        settings: { index: ITEM_SETTINGS },
        mappings: itemMapping(this.vectorDims) as never,
      });
    } catch (e) {
      if (!(
        e instanceof errors.ResponseError &&
        e.body?.error?.type === 'resource_already_exists_exception'
      ))
        throw e;
    }
    this.known.add(index);
    return index;
  }

  /**
   * Adds the field for this embedder's vector size to every existing dataset index (indices
   * made for another size lack it), so re-processed items can store their new vectors.
   */
  private vectorFieldReady: Promise<void> | undefined;

  private prepareVectorField(): Promise<void> {
    // Once per process, before the first vector write; retried after a failure.
    this.vectorFieldReady ??= this.putVectorField().catch((e: unknown) => {
      this.vectorFieldReady = undefined;
      throw e;
    });
    return this.vectorFieldReady;
  }

  private async putVectorField(): Promise<void> {
    try {
      await this.client.indices.putMapping({
        index: `${this.prefix}items-*`,
        allow_no_indices: true,
        properties: vectorMapping(this.vectorDims) as never,
      });
    } catch (e) {
      if (e instanceof errors.ResponseError && e.statusCode === 400)
        throw new Error(
          `Elasticsearch: cannot add the ${this.vectorDims}-dimension vector field to the indices ${this.prefix}items-*: ${e.message}`,
          { cause: e },
        );
      throw e;
    }
  }

  private async exists(datasetId: string): Promise<boolean> {
    const index = this.index(datasetId);
    if (this.known.has(index)) return true;
    const yes = await this.client.indices.exists({ index });
    if (yes) this.known.add(index);
    return yes;
  }

  /**
   * `realtime` reads see unrefreshed writes (needed for compare-and-swap); client-facing reads
   * are not realtime, so details, listing and search agree on what exists.
   */
  private async mget(
    datasetId: string,
    ids: string[],
    source = true,
    realtime = true,
  ): Promise<Hit[]> {
    if (!ids.length || !(await this.exists(datasetId))) return [];
    const out: Hit[] = [];
    for (const part of chunks([...new Set(ids)], 1000)) {
      const r = await this.client.mget<ItemDoc>({
        index: this.index(datasetId),
        ids: part,
        _source: source,
        realtime,
      });
      for (const d of r.docs) if ('found' in d && d.found) out.push(d as Hit);
    }
    return out;
  }

  existingIds(datasetId: string, ids: string[]): Promise<Set<string>> {
    return guard(async () => new Set((await this.mget(datasetId, ids, false)).map((h) => h._id)));
  }

  applyWrites(
    datasetId: string,
    writes: ContentWrite[],
    mode: WriteMode,
    now: number,
  ): Promise<ProcessingJob[]> {
    return guard(async () => {
      const index = await this.ensureIndex(datasetId);
      // Duplicate ids in one batch apply in order: fold them into one write per id first.
      const byId = new Map<string, ContentWrite[]>();
      for (const w of writes) byId.set(w.id, [...(byId.get(w.id) ?? []), w]);
      const jobs = new Map<string, ProcessingJob>();
      let pending = [...byId.keys()];
      for (let attempt = 0; pending.length && attempt < CAS_RETRIES; attempt++) {
        const current = new Map((await this.mget(datasetId, pending)).map((h) => [h._id, h]));
        const ops: unknown[] = [];
        const planned: string[] = [];
        for (const id of pending) {
          const hit = current.get(id);
          let item = hit?._source ? fromDoc(hit._source) : undefined;
          let reprocess = false;
          let urlChanged = false;
          for (const w of byId.get(id)!) {
            const out = applyWrite(item, w, mode, now);
            if (!out) continue;
            item = out.item;
            reprocess ||= out.reprocess;
            urlChanged ||= out.urlChanged;
          }
          if (!item) continue;
          const error = urlChanged ? null : (hit?._source?.error ?? null);
          const doc = toDoc(datasetId, item, error, hit?._source);
          ops.push(
            hit
              ? {
                  index: {
                    _index: index,
                    _id: id,
                    if_seq_no: hit._seq_no,
                    if_primary_term: hit._primary_term,
                  },
                }
              : { create: { _index: index, _id: id } },
            doc,
          );
          planned.push(id);
          if (reprocess) jobs.set(id, { datasetId, itemId: id, url: item.url, attempt: 1 });
          else jobs.delete(id);
        }
        if (!ops.length) break;
        const r = await this.client.bulk({ operations: ops as never[], refresh: 'wait_for' });
        pending = [];
        r.items.forEach((it, i) => {
          const res = it.index ?? it.create;
          if (!res?.error) return;
          if (res.status === 409) pending.push(planned[i]);
          else
            throw new AppError(
              'unavailable',
              `the search engine refused item '${planned[i]}': ${res.error.reason ?? res.error.type}`,
              undefined,
              5,
            );
        });
      }
      if (pending.length)
        throw new AppError(
          'unavailable',
          `items changed concurrently too often: ${pending.slice(0, 5).join(', ')}`,
          undefined,
          1,
        );
      this.catalogues.delete(datasetId);
      return [...jobs.values()];
    });
  }

  deleteItems(datasetId: string, ids: string[]): Promise<number> {
    return guard(async () => {
      if (!ids.length || !(await this.exists(datasetId))) return 0;
      const r = await this.client.bulk({
        operations: ids.map((id) => ({ delete: { _index: this.index(datasetId), _id: id } })),
        refresh: 'wait_for',
      });
      this.catalogues.delete(datasetId);
      return r.items.filter((i) => i.delete?.result === 'deleted').length;
    });
  }

  dropDataset(datasetId: string): Promise<void> {
    return guard(async () => {
      await this.client.indices.delete({ index: this.index(datasetId) }, { ignore: [404] });
      this.known.delete(this.index(datasetId));
      this.catalogues.delete(datasetId);
    });
  }

  list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return [];
      const index = this.index(datasetId);
      const page = (from: number | undefined, size: number, after?: unknown[]) =>
        this.client.search<ItemDoc>({
          index,
          size,
          ...(from !== undefined ? { from } : {}),
          ...(after ? { search_after: after as never } : {}),
          sort: [{ id: 'asc' }],
          _source: ['id', 'url', 'state'],
          track_total_hits: false,
        });
      let hits: Hit[];
      if (offset + limit <= WINDOW) hits = (await page(offset, limit)).hits.hits as Hit[];
      else {
        // Walk to the offset with search_after (no from/size beyond the result window).
        let after: unknown[] | undefined;
        let skipped = 0;
        while (skipped < offset) {
          const n = Math.min(WINDOW, offset - skipped);
          const r = (
            await this.client.search({
              index,
              size: n,
              sort: [{ id: 'asc' }],
              _source: false,
              ...(after ? { search_after: after as never } : {}),
            })
          ).hits.hits;
          if (!r.length) return [];
          skipped += r.length;
          after = r[r.length - 1].sort as unknown[];
        }
        hits = (await page(undefined, limit, after)).hits.hits as Hit[];
      }
      return hits.map((h) => ({
        id: h._source!.id,
        url: h._source!.url,
        processed: h._source!.state === 'processed',
      }));
    });
  }

  getItems(datasetId: string, ids: string[]): Promise<StoredItem[]> {
    return guard(async () =>
      (await this.mget(datasetId, ids, true, false)).map((h) => fromDoc(h._source!)),
    );
  }

  counts(datasetId: string): Promise<DatasetCounts> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return { items: 0, processed: 0, pending: 0, errors: 0 };
      const r = await this.client.search({
        index: this.index(datasetId),
        size: 0,
        track_total_hits: true,
        aggs: {
          states: { terms: { field: 'state' } },
          errors: { filter: { term: { has_error: true } } },
        },
      });
      const aggs = r.aggregations as {
        states: { buckets: { key: string; doc_count: number }[] };
        errors: { doc_count: number };
      };
      const by = Object.fromEntries(aggs.states.buckets.map((b) => [b.key, b.doc_count]));
      return {
        items: (r.hits.total as { value: number }).value,
        processed: by.processed ?? 0,
        pending: by.pending ?? 0,
        errors: aggs.errors.doc_count,
      };
    });
  }

  private async kinds(datasetId: string, scopes: string[]): Promise<Map<string, Set<ValueKind>>> {
    const key = scopes.join(',');
    const cached = this.catalogues.get(datasetId);
    if (cached && cached.scopes === key && this.now() - cached.at < CATALOGUE_TTL_MS)
      return cached.value;
    const value = new Map<string, Set<ValueKind>>();
    if (await this.exists(datasetId)) {
      const r = await this.client.search({
        index: this.index(datasetId),
        ...catalogueBody(scopes),
      });
      type B = {
        key: string | number;
        key_as_string?: string;
        t?: { buckets: B[] };
        arr?: { buckets: B[] };
      };
      const fields = (r.aggregations as { a: { sel: { fields: { buckets: B[] } } } }).a.sel.fields
        .buckets;
      for (const f of fields) {
        const set = new Set<ValueKind>();
        for (const t of f.t!.buckets) {
          for (const a of t.arr!.buckets) {
            const arr = a.key_as_string === 'true' || a.key === 1;
            const base = t.key === 'n' ? 'number' : t.key === 'b' ? 'boolean' : 'string';
            set.add((arr ? `${base}[]` : base) as ValueKind);
          }
        }
        value.set(String(f.key), set);
      }
    }
    this.catalogues.set(datasetId, { at: this.now(), scopes: key, value });
    return value;
  }

  catalogue(datasetId: string): Promise<FieldCatalogue> {
    return guard(() => this.kinds(datasetId, ['pub', 'priv']));
  }

  publicFields(datasetId: string): Promise<string[]> {
    return guard(async () => {
      const r = await this.client
        .search({ index: this.index(datasetId), ...catalogueBody(['pub']) })
        .catch((e) => {
          if (e instanceof errors.ResponseError && e.statusCode === 404) return undefined;
          throw e;
        });
      const names = r
        ? (
            r.aggregations as { a: { sel: { fields: { buckets: { key: string }[] } } } }
          ).a.sel.fields.buckets
            .map((b) => b.key)
            .sort()
        : [];
      return [...names, ...GENERATED_FIELDS, ...SERVICE_TIME_FIELDS];
    });
  }

  /** Read, check, write with if_seq_no: a job for an old url can never overwrite a newer one. */
  private async casUpdate(
    job: ProcessingJob,
    change: (doc: ItemDoc) => ItemDoc | undefined,
  ): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
      const [hit] = await this.mget(job.datasetId, [job.itemId]);
      const next = hit?._source && change(hit._source);
      if (!next) return false;
      try {
        await this.client.index({
          index: this.index(job.datasetId),
          id: job.itemId,
          document: next,
          if_seq_no: hit._seq_no,
          if_primary_term: hit._primary_term,
          // No wait_for: it capped a worker at one result per refresh (30 images/s in
          // bench/results). Counts, search, details and errors all read the refreshed view,
          // so a client never sees an item counted as processed but missing from search.
        });
        return true;
      } catch (e) {
        if (!(e instanceof errors.ResponseError && e.statusCode === 409)) throw e;
      }
    }
    throw new AppError(
      'unavailable',
      `item '${job.itemId}' changed concurrently too often`,
      undefined,
      1,
    );
  }

  markProcessed(job: ProcessingJob, f: ImageFeatures, _now: number): Promise<boolean> {
    return guard(async () => {
      await this.prepareVectorField();
      return this.casUpdate(job, (d) => {
        if (d.url !== job.url || d.state === 'processed') return undefined;
        const item = fromDoc(d);
        return toDoc(
          job.datasetId,
          {
            ...item,
            state: 'processed',
            image: { width: f.width, height: f.height, url: job.url },
          },
          null,
          { vector: f.vector, embedder: f.embedder },
        );
      });
    });
  }

  markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string },
  ): Promise<boolean> {
    return guard(async () => {
      await this.prepareVectorField();
      return this.casUpdate(job, (d) => {
        if (d.url !== job.url || d.state !== 'processed') return undefined;
        return toDoc(job.datasetId, fromDoc(d), d.error ?? null, embedding);
      });
    });
  }

  private staleQuery(embedder: string) {
    return {
      bool: { filter: [{ term: { state: 'processed' } }], must_not: [{ term: { embedder } }] },
    };
  }

  staleEmbeddings(
    embedder: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }> {
    return guard(() => this.jobsMatching(this.staleQuery(embedder), cursor, limit));
  }

  staleEmbeddingCount(datasetId: string, embedder: string): Promise<number> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return 0;
      return (
        await this.client.count({
          index: this.index(datasetId),
          query: this.staleQuery(embedder),
        })
      ).count;
    });
  }

  markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return guard(() =>
      this.casUpdate(job, (d) => {
        if (d.url !== job.url || d.state !== 'pending') return undefined;
        return toDoc(
          job.datasetId,
          { ...fromDoc(d), state: 'failed' },
          { ...failure, url: job.url, occurred_at: new Date(now).toISOString() },
        );
      }),
    );
  }

  markPostponed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return guard(() =>
      this.casUpdate(job, (d) => {
        if (d.url !== job.url || d.state !== 'pending') return undefined;
        return toDoc(job.datasetId, fromDoc(d), {
          ...failure,
          url: job.url,
          occurred_at: new Date(now).toISOString(),
        });
      }),
    );
  }

  listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return { errors: [], total: 0 };
      const r = await this.client.search<ItemDoc>({
        index: this.index(datasetId),
        query: { term: { has_error: true } },
        sort: [{ id: 'asc' }],
        from: offset,
        size: limit,
        track_total_hits: true,
        _source: ['id', 'error'],
      });
      return {
        errors: r.hits.hits.map((h) => {
          const e = h._source!.error!;
          return {
            id: h._source!.id,
            url: e.url,
            code: e.code,
            message: e.message,
            attempts: e.attempts,
            occurred_at: e.occurred_at,
          };
        }),
        total: (r.hits.total as { value: number }).value,
      };
    });
  }

  pendingJobs(
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }> {
    return guard(() => this.jobsMatching({ term: { state: 'pending' } }, cursor, limit));
  }

  /** Items of every dataset matching `query`, as jobs, paged with search_after. */
  private async jobsMatching(
    query: unknown,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }> {
    const r = await this.client.search<ItemDoc>(
      {
        index: `${this.prefix}items-*`,
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

  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return { items: [], total: 0 };
      const r = await this.client.search<ItemDoc>({
        index: this.index(datasetId),
        ...searchBody(req),
      } as never);
      return {
        items: r.hits.hits.map((h) => fromDoc(h._source!)),
        total: (r.hits.total as { value: number }).value,
      };
    });
  }

  getEmbedding(datasetId: string, id: string): Promise<StoredEmbedding | undefined> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return undefined;
      const [hit] = await this.mget(datasetId, [id], true, false);
      const d = hit?._source;
      if (!d || d.state !== 'processed') return undefined;
      const vector = docVector(d);
      return { ...(d.embedder ? { embedder: d.embedder } : {}), ...(vector ? { vector } : {}) };
    });
  }

  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return [];
      const r = await this.client.search<ItemDoc>({
        index: this.index(datasetId),
        ...knnBody(req),
      } as never);
      return r.hits.hits.map((h) => {
        const vector = req.includeVectors ? docVector(h._source!) : undefined;
        return { item: fromDoc(h._source!), score: h._score ?? 0, ...(vector ? { vector } : {}) };
      });
    });
  }

  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return guard(async () => {
      if (!(await this.exists(datasetId))) return [];
      const r = await this.client.search<ItemDoc>({
        index: this.index(datasetId),
        ...sampleBody(conditions, limit, seed),
      } as never);
      return r.hits.hits.map((h) => fromDoc(h._source!));
    });
  }

  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    return guard(async () => {
      const out: Facets = Object.fromEntries(fields.map((f) => [f, {}]));
      if (!(await this.exists(datasetId)) || !fields.length) return out;
      const r = await this.client.search({
        index: this.index(datasetId),
        ...facetsBody(conditions, fields),
      } as never);
      type Bucket = { key: string | number; doc_count: number };
      const aggs = r.aggregations as Record<
        string,
        { sel: { s: { buckets: Bucket[] }; n: { buckets: Bucket[] } } }
      >;
      fields.forEach((f, i) => {
        const counts: Record<string, number> = {};
        for (const b of [...aggs[`f${i}`].sel.s.buckets, ...aggs[`f${i}`].sel.n.buckets])
          counts[String(b.key)] = (counts[String(b.key)] ?? 0) + b.doc_count;
        out[f] = counts;
      });
      return out;
    });
  }

  ping(): Promise<void> {
    return guard(async () => {
      await this.client.cluster.health({ timeout: '2s' });
    });
  }
}
