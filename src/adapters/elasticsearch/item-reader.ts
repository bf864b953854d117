import type { DatasetCounts } from '../../domain/dataset';
import { groupRuns } from '../../domain/duplicates';
import type { ListEntry, ProcessingErrorRecord, StoredItem } from '../../domain/item';
import {
  labelledVector,
  type ItemReader,
  type LabelledVector,
  type StoredEmbedding,
} from '../../ports/item-reader';
import type { FieldCatalogue } from '../../query/resolve';
import { EMBEDDING_SOURCE, docFloats, docVector, fromDoc, type ItemDoc } from './document';
import type { FieldCatalogues } from './field-catalogue';
import { KeyedGroupCommit } from '../group-commit';
import type { EsIndices } from './indices';
import type { KnownVersions } from './known-versions';
import { ItemIndex, orEmpty, type Hit } from './item-index';
import { Refresher } from './refresher';

/** GET content pages past this window walk the index with search_after. */
const WINDOW = 10_000;

/** Pixel hashes per composite aggregation page, and per terms filter of their items. */
const HASH_PAGE = 1_000;

/**
 * ItemReader on Elasticsearch: details, listing, counts, fields, errors, embeddings. A dataset
 * whose index does not exist reads as empty.
 */
export class EsItemReader extends ItemIndex implements ItemReader {
  constructor(
    indices: EsIndices,
    /** The fields of each dataset, shared with the writer, whose writes forget them. */
    private readonly catalogues: FieldCatalogues,
    /** Where a worker's realtime read of its item is kept for the result write that follows. */
    private readonly known?: KnownVersions,
  ) {
    super(indices);
  }

  /** For fresh counts: judgements asked together share one refresh of their index. */
  private readonly refresher = new Refresher(() => this.client);

  /**
   * Workers read their item, realtime, as each job starts; jobs start together when a grouped
   * result write answers several at once. Reads asked for while one is in flight go together
   * in the next `mget`, one round trip instead of one per job.
   */
  private readonly latestReads = new KeyedGroupCommit(
    async (datasetId: string, ids: string[]): Promise<Array<Hit | undefined>> => {
      const { hits } = await this.mget(datasetId, ids);
      for (const h of hits) this.known?.remember(this.index(datasetId), h);
      const byId = new Map(hits.map((h) => [h._id, h]));
      return ids.map((x) => byId.get(x));
    },
    1000,
  );

  async existingIds(datasetId: string, ids: string[]): Promise<Set<string>> {
    const { hits } = await this.mget(datasetId, ids, { source: false });
    return new Set(hits.map((h) => h._id));
  }

  async getItems(
    datasetId: string,
    ids: string[],
    opts: { latest?: boolean } = {},
  ): Promise<StoredItem[]> {
    if (opts.latest && ids.length === 1) {
      const hit = await this.latestReads.submit(datasetId, ids[0]!);
      return hit?._source ? [fromDoc(hit._source)] : [];
    }
    return (await this.mget(datasetId, ids, { realtime: !!opts.latest })).hits.map((h) =>
      fromDoc(h._source!),
    );
  }

  async getEmbedding(
    datasetId: string,
    id: string,
    opts: { latest?: boolean } = {},
  ): Promise<StoredEmbedding | undefined> {
    const [hit] = (await this.mget(datasetId, [id], { realtime: !!opts.latest })).hits;
    const d = hit?._source;
    if (!d || d.state !== 'processed') return undefined;
    const vector = docVector(d);
    return { ...(d.embedder ? { embedder: d.embedder } : {}), ...(vector ? { vector } : {}) };
  }

  async list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]> {
    return orEmpty(async () => {
      const hits = await this.listPage(datasetId, offset, limit);
      return hits.map((h) => ({
        id: h._source!.id,
        url: h._source!.url,
        processed: h._source!.state === 'processed',
      }));
    }, []);
  }

  private async listPage(datasetId: string, offset: number, limit: number): Promise<Hit[]> {
    const index = this.index(datasetId);
    const page = async (from: number | undefined, size: number, after?: unknown[]) =>
      (
        await this.client.search<ItemDoc>({
          index,
          size,
          ...(from !== undefined ? { from } : {}),
          ...(after ? { search_after: after as never } : {}),
          sort: [{ id: 'asc' }],
          _source: ['id', 'url', 'state'],
          track_total_hits: false,
        })
      ).hits.hits as Hit[];
    if (offset + limit <= WINDOW) return page(offset, limit);
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
    return page(undefined, limit, after);
  }

  async counts(datasetId: string, opts?: { fresh?: boolean }): Promise<DatasetCounts> {
    return orEmpty(
      async () => {
        if (opts?.fresh) await this.refresher.visible(this.index(datasetId));
        const r = await this.client.search({
          index: this.index(datasetId),
          // copies of a shard refresh on their own clocks, so two reads served by two copies can
          // count backwards (a ready dataset answering 409); one dataset's counts ask the same
          // copies while they are up, and a missing shard fails rather than counts short
          preference: `counts-${datasetId}`,
          allow_partial_search_results: false,
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
      },
      { items: 0, processed: 0, pending: 0, errors: 0 },
    );
  }

  /**
   * The hashes held by two or more processed items, a composite aggregation page at a time, then
   * their items sorted by hash and id: two passes over the hashes, none over every item.
   */
  async sameImageGroups(datasetId: string): Promise<string[][]> {
    return orEmpty(async () => {
      const index = this.index(datasetId);
      const processed = { term: { state: 'processed' } };
      const shared: string[] = [];
      let after: Record<string, string> | undefined;
      do {
        const r = await this.client.search({
          index,
          size: 0,
          query: { bool: { filter: [processed, { exists: { field: 'pixel_hash' } }] } },
          aggs: {
            h: {
              composite: {
                size: HASH_PAGE,
                sources: [{ hash: { terms: { field: 'pixel_hash' } } }],
                ...(after ? { after } : {}),
              },
            },
          },
        });
        const agg = r.aggregations?.h as
          | {
              buckets: Array<{ key: { hash: string }; doc_count: number }>;
              after_key?: Record<string, string>;
            }
          | undefined;
        for (const b of agg?.buckets ?? []) if (b.doc_count > 1) shared.push(b.key.hash);
        after = agg?.buckets.length === HASH_PAGE ? agg.after_key : undefined;
      } while (after);
      const rows: Array<{ id: string; hash: string }> = [];
      for (let i = 0; i < shared.length; i += HASH_PAGE) {
        const hashes = shared.slice(i, i + HASH_PAGE);
        let from: unknown[] | undefined;
        for (;;) {
          const r = await this.client.search<ItemDoc>({
            index,
            size: WINDOW,
            query: { bool: { filter: [processed, { terms: { pixel_hash: hashes } }] } },
            sort: [{ pixel_hash: 'asc' }, { id: 'asc' }],
            _source: ['id', 'pixel_hash'],
            track_total_hits: false,
            ...(from ? { search_after: from as never } : {}),
          });
          const hits = r.hits.hits;
          for (const h of hits) rows.push({ id: h._source!.id, hash: h._source!.pixel_hash! });
          if (hits.length < WINDOW) break;
          from = hits.at(-1)!.sort;
        }
      }
      return groupRuns(rows);
    }, []);
  }

  async processedSince(
    datasetId: string,
    since: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<Array<{ id: string; processedAt: number }>> {
    return orEmpty(async () => {
      const filter: object[] = [{ term: { state: 'processed' } }];
      if (since !== undefined) filter.push({ range: { processed_at: { gte: since } } });
      const r = await this.client.search<ItemDoc>({
        index: this.index(datasetId),
        size: limit,
        query: { bool: { filter } },
        sort: [{ id: 'asc' }],
        _source: ['id', 'image.processedAt'],
        track_total_hits: false,
        ...(after !== undefined ? { search_after: [after] } : {}),
      });
      return r.hits.hits.map((h) => ({
        id: h._source!.id,
        processedAt: h._source!.image?.processedAt ?? 0,
      }));
    }, []);
  }

  async vectorsPage(
    datasetId: string,
    embedder: string,
    field: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ items: LabelledVector[]; next?: string }> {
    return orEmpty(
      async () => {
        const r = await this.client.search<ItemDoc>({
          index: this.index(datasetId),
          size: limit,
          query: {
            bool: {
              filter: [
                { term: { state: 'processed' } },
                { term: { embedder } },
                // only items with a public value of the field: the others' vectors stay put
                {
                  nested: {
                    path: 'attrs',
                    query: {
                      bool: {
                        filter: [
                          { term: { 'attrs.f': field } },
                          { term: { 'attrs.scope': 'pub' } },
                        ],
                      },
                    },
                  },
                },
              ],
            },
          },
          sort: [{ id: 'asc' }],
          _source: ['id', 'metadata', 'pixel_hash', EMBEDDING_SOURCE, 'vector_*'],
          track_total_hits: false,
          ...(after !== undefined ? { search_after: [after] } : {}),
        });
        const hits = r.hits.hits;
        const items = hits.flatMap((h) => {
          const d = h._source!;
          const vector = docFloats(d);
          // an item whose image could not be embedded again keeps its embedder, not a vector
          if (!vector?.length) return [];
          return [labelledVector({ ...d, pixelHash: d.pixel_hash }, vector, field)];
        });
        // pages end by the hits read, not the items kept
        return hits.length < limit ? { items } : { items, next: hits.at(-1)!._source!.id };
      },
      { items: [] },
    );
  }

  async listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }> {
    return orEmpty(
      async () => {
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
              occurredAt: e.occurred_at,
            };
          }),
          total: (r.hits.total as { value: number }).value,
        };
      },
      { errors: [], total: 0 },
    );
  }

  catalogue(datasetId: string): Promise<FieldCatalogue> {
    return this.catalogues.catalogue(datasetId);
  }

  publicFields(datasetId: string): Promise<string[]> {
    return this.catalogues.publicFields(datasetId);
  }

  async ping(): Promise<void> {
    await this.client.cluster.health({ timeout: '2s' });
  }
}
