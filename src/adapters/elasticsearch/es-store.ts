import type { AnalyticsSpec, Figures } from '../../domain/analytics';
import type { ContentWrite, WriteMode } from '../../domain/content';
import type { DatasetCounts } from '../../domain/dataset';
import type {
  ListEntry,
  ProcessingErrorRecord,
  ProcessingJob,
  StoredItem,
} from '../../domain/item';
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
import { FieldCatalogues } from './field-catalogue';
import type { EsIndices } from './indices';
import { ItemProcessing } from './item-processing';
import { ItemReads } from './item-reads';
import { ItemWrites } from './item-writes';
import { KnownVersions } from './known-versions';
import { EsSearchEngine } from './search-engine';

type JobPage = { jobs: ProcessingJob[]; next?: string };

/**
 * ContentStore and SearchEngine on Elasticsearch 8, one index per dataset (named and created
 * by EsIndices). The work is done by one part per concern:
 * - ItemWrites: client writes with optimistic concurrency, deletes, dataset deletion;
 * - ItemProcessing: workers' results (compare-and-swap) and the vector fields;
 * - ItemReads: details, listing, counts, errors, embeddings, job pages;
 * - KnownVersions: a worker's realtime read of its item, kept for its result write;
 * - FieldCatalogues: metadata fields and value kinds (a 2 s per-instance cache);
 * - EsSearchEngine: search, facets, similar, sample.
 * Nothing here remembers whether an index exists: another host may create or delete it.
 */
export class ElasticsearchStore implements ContentStore, SearchEngine {
  private readonly catalogues: FieldCatalogues;
  private readonly writes: ItemWrites;
  private readonly processing: ItemProcessing;
  private readonly reads: ItemReads;
  private readonly engine: EsSearchEngine;

  constructor(
    readonly indices: EsIndices,
    now: () => number,
    /** Dimensions of the embedder's vectors; fixed per index. */
    vectorDims: number,
  ) {
    this.catalogues = new FieldCatalogues(indices, now);
    this.writes = new ItemWrites(indices, this.catalogues, vectorDims);
    const known = new KnownVersions();
    this.processing = new ItemProcessing(indices, vectorDims, known);
    this.reads = new ItemReads(indices, known);
    this.engine = new EsSearchEngine(indices);
  }

  // ContentStore: writes
  applyWrites(
    datasetId: string,
    writes: ContentWrite[],
    mode: WriteMode,
    now: number,
  ): Promise<ProcessingJob[]> {
    return this.writes.applyWrites(datasetId, writes, mode, now);
  }
  deleteItems(datasetId: string, ids: string[]): Promise<number> {
    return this.writes.deleteItems(datasetId, ids);
  }
  dropDataset(datasetId: string): Promise<void> {
    return this.writes.dropDataset(datasetId);
  }

  // ContentStore: reads
  existingIds(datasetId: string, ids: string[]): Promise<Set<string>> {
    return this.reads.existingIds(datasetId, ids);
  }
  list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]> {
    return this.reads.list(datasetId, offset, limit);
  }
  getItems(datasetId: string, ids: string[], opts?: { latest?: boolean }): Promise<StoredItem[]> {
    return this.reads.getItems(datasetId, ids, opts);
  }
  counts(datasetId: string): Promise<DatasetCounts> {
    return this.reads.counts(datasetId);
  }
  catalogue(datasetId: string): Promise<FieldCatalogue> {
    return this.catalogues.catalogue(datasetId);
  }
  publicFields(datasetId: string): Promise<string[]> {
    return this.catalogues.publicFields(datasetId);
  }
  listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }> {
    return this.reads.listErrors(datasetId, offset, limit);
  }
  getEmbedding(
    datasetId: string,
    id: string,
    opts?: { latest?: boolean },
  ): Promise<StoredEmbedding | undefined> {
    return this.reads.getEmbedding(datasetId, id, opts);
  }

  // ContentStore: processing
  markProcessed(job: ProcessingJob, features: ImageFeatures, now: number): Promise<boolean> {
    return this.processing.markProcessed(job, features, now);
  }
  markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string },
  ): Promise<boolean> {
    return this.processing.markEmbedded(job, embedding);
  }
  markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return this.processing.markFailed(job, failure, now);
  }
  markPostponed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return this.processing.markPostponed(job, failure, now);
  }
  pendingJobs(cursor: string | undefined, limit: number): Promise<JobPage> {
    return this.reads.pendingJobs(cursor, limit);
  }
  staleEmbeddings(embedder: string, cursor: string | undefined, limit: number): Promise<JobPage> {
    return this.reads.staleEmbeddings(embedder, cursor, limit);
  }
  staleEmbeddingCount(datasetId: string, embedder: string): Promise<number> {
    return this.reads.staleEmbeddingCount(datasetId, embedder);
  }

  async ping(): Promise<void> {
    await this.indices.client.cluster.health({ timeout: '2s' });
  }

  // SearchEngine
  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }> {
    return this.engine.search(datasetId, req);
  }
  analytics(datasetId: string, conditions: Condition[], spec: AnalyticsSpec): Promise<Figures> {
    return this.engine.analytics(datasetId, conditions, spec);
  }
  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    return this.engine.facets(datasetId, conditions, fields);
  }
  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    return this.engine.similar(datasetId, req);
  }
  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return this.engine.sample(datasetId, conditions, limit, seed);
  }
}
