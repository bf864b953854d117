import { toDoc } from 'visual-search-service/dist/adapters/elasticsearch/document';
import { esPorts } from 'visual-search-service/dist/adapters/elasticsearch/es-ports';
import type { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import { DescriptorEmbedder } from 'visual-search-service/dist/adapters/embedders/descriptor';
import { hybridId } from 'visual-search-service/dist/adapters/embedders/index';
import { openDb } from 'visual-search-service/dist/adapters/embedded/db';
import { EmbeddedItemProcessing } from 'visual-search-service/dist/adapters/embedded/item-processing';
import { EmbeddedItemWriter } from 'visual-search-service/dist/adapters/embedded/item-writer';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import path from 'node:path';
import { catalogue } from './catalogue';
import { unitVector } from './common';
import { loadRealVectors } from './real-vectors';

/** Whose vectors the seeded items carry: an embedder's id and length, without loading it. */
export interface BenchVectors {
  kind: 'descriptor' | 'hybrid';
  id: string;
  dimensions: number;
  /**
   * The default embedder's vectors of real images (bench/real-vectors.ts), row i for item i,
   * when enough are cached; otherwise each item gets a random unit vector.
   */
  real?: Float32Array;
}

/**
 * `v` with real vectors for `items` items when bench/real-vectors.ts has cached that many: the
 * hybrid's as they are, the descriptor's as the hybrid's first block made unit length again
 * (the hybrid is the descriptor's unit vector and the CNN's, each weighted, concatenated).
 */
export async function withRealVectors(v: BenchVectors, items: number): Promise<BenchVectors> {
  let real;
  try {
    real = await loadRealVectors(items);
  } catch {
    return v;
  }
  if (v.kind === 'hybrid') return { ...v, real: real.data };
  const rows = new Float32Array(items * v.dimensions);
  for (let i = 0; i < items; i++) {
    const row = real.data.subarray(i * real.dims, i * real.dims + v.dimensions);
    const n = Math.hypot(...row);
    for (let k = 0; k < v.dimensions; k++) rows[i * v.dimensions + k] = row[k]! / n;
  }
  return { ...v, real: rows };
}

const descriptor = new DescriptorEmbedder();
export const DESCRIPTOR_VECTORS: BenchVectors = {
  kind: 'descriptor',
  id: descriptor.id,
  dimensions: descriptor.dimensions,
};
/** The default embedder's: the descriptor's block beside EfficientNet-Lite0's 1,280 features. */
export const HYBRID_VECTORS: BenchVectors = {
  kind: 'hybrid',
  id: hybridId(),
  dimensions: descriptor.dimensions + 1280,
};

const seedOf = (id: string) => Number(id.replace(/\D/g, '')) + 1;
/** A catalogue item's embedding: a real image's, or a deterministic random one, one per id. */
export const vectorOf = (v: BenchVectors, id: string) => {
  const i = seedOf(id) - 1;
  return {
    vector: v.real
      ? Array.from(v.real.subarray(i * v.dimensions, (i + 1) * v.dimensions))
      : unitVector(v.dimensions, seedOf(id)),
    embedder: v.id,
  };
};

/**
 * `items` processed catalogue items (or those of `source`) straight into a dataset's index (bulk, no refresh per
 * batch): the benchmarks measure queries, not ingestion. The first item goes through the store
 * port so the index is created as the service creates it.
 */
export async function seedElasticsearch(
  indices: EsIndices,
  datasetId: string,
  items: number,
  vectors: BenchVectors,
  source: Iterable<StoredItem> = catalogue(items),
  /** Merged to one segment (the default), or left as bulk loading left it. */
  merge = true,
): Promise<void> {
  const es = indices.client;
  const { content: store } = esPorts(indices, { vectorDims: vectors.dimensions });
  const first = catalogue(1).next().value as StoredItem;
  await store.applyWrites(datasetId, [{ id: first.id, url: first.url }], 'post', Date.now());
  const index = indices.items(datasetId);
  let ops: object[] = [];
  const flush = async (): Promise<void> => {
    const r = await es.bulk({ operations: ops, refresh: false });
    if (r.errors)
      throw new Error(`bulk load failed: ${JSON.stringify(r.items.find((x) => x.index?.error))}`);
    ops = [];
  };
  for (const it of source) {
    ops.push(
      { index: { _index: index, _id: it.id } },
      toDoc(datasetId, it, null, vectorOf(vectors, it.id)),
    );
    // about 6 MB per bulk request whatever the vectors' length
    if (ops.length >= Math.max(200, (4000 * 140) / vectors.dimensions)) await flush();
  }
  if (ops.length) await flush();
  await es.indices.refresh({ index });
  if (!merge) return;
  // Merging HNSW graphs of 1,420-d vectors takes many minutes: run it as a task and wait for
  // it (a request that waits timed out, and the merge then ran under the measurements).
  const { task } = await es.indices.forcemerge({
    index,
    max_num_segments: 1,
    wait_for_completion: false,
  });
  // A poll refused while the node is short of heap (its parent circuit breaker answered 429
  // during a 1,000,000-item merge with other work on the node) says nothing about the merge:
  // ask again rather than throw away an hour of loading.
  for (let refused = 0; ;) {
    const t = await es.tasks.get({ task_id: String(task) }).catch((e: unknown) => {
      const status = (e as { meta?: { statusCode?: number } }).meta?.statusCode;
      if ((status === 429 || status === 503) && ++refused < 60) return { completed: false };
      throw e;
    });
    if (t.completed) break;
    await new Promise((r) => setTimeout(r, 5000));
  }
}

/**
 * Processed items straight into an embedded store (`dataDir/store.db`), on a second connection in
 * one transaction: the benches measure search, not 100,000 separate fsyncs.
 */
export function seedEmbedded(
  dataDir: string,
  datasetId: string,
  items: Iterable<StoredItem>,
  vectors: BenchVectors,
): void {
  const db = openDb(path.join(dataDir, 'store.db'));
  const writer = new EmbeddedItemWriter(db);
  const processing = new EmbeddedItemProcessing(db);
  db.exec('BEGIN');
  let batch: StoredItem[] = [];
  const flush = (): void => {
    void writer.applyWrites(
      datasetId,
      batch.map((it) => ({
        id: it.id,
        url: it.url,
        metadata: it.metadata,
        privateMetadata: it.privateMetadata,
      })),
      'post',
      batch[0]!.createdAt,
    );
    for (const it of batch)
      void processing.markProcessed(
        { datasetId, itemId: it.id, url: it.url, attempt: 1 },
        {
          width: it.image!.width,
          height: it.image!.height,
          format: 'jpeg',
          ...vectorOf(vectors, it.id),
        },
        it.updatedAt,
      );
    batch = [];
  };
  let written = 0;
  for (const it of items) {
    batch.push(it);
    if (batch.length === 1000) flush();
    // bounded transactions, the WAL folded back each time: one transaction of 1,000,000
    // items grew the WAL past 5 GB
    if (++written % 50_000 === 0) {
      if (batch.length) flush();
      db.exec('COMMIT');
      db.pragma('wal_checkpoint(TRUNCATE)');
      db.exec('BEGIN');
    }
  }
  if (batch.length) flush();
  db.exec('COMMIT');
  db.close();
}
