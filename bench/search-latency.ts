/**
 * Search latency on 100,000 processed items, on both engines and with both embedders' vector
 * lengths (the default hybrid's 1,420 and the descriptor's 140): a q filter + sort + page
 * through the REST gateway, facets, similar; on Elasticsearch also the same question as a
 * careful hand-written client would send it straight to Elasticsearch, interleaved with the
 * gateway's requests, so the gateway's own cost (auth, rate limiting, metering, mapping) shows
 * as a ratio.
 *
 *   npm run bench:search   (BENCH_ITEMS, BENCH_REQUESTS, BENCH_ENGINES, BENCH_EMBEDDERS to change)
 */
import { Client } from '@elastic/elasticsearch';
import fs from 'node:fs';
import path from 'node:path';
import { openDb } from 'visual-search-service/dist/adapters/embedded/db';
import { EmbeddedSearchEngine } from 'visual-search-service/dist/adapters/embedded/search-engine';
import v8 from 'node:v8';
import vm from 'node:vm';
import { searchBody } from 'visual-search-service/dist/adapters/elasticsearch/dsl';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { RunningApp } from 'visual-search-service/dist/app/start';
import { parseQ } from 'visual-search-service/dist/query/parse';
import { resolveFilters } from 'visual-search-service/dist/query/resolve';
import { catalogue, listingQuery as query } from './catalogue';
import {
  DESCRIPTOR_VECTORS,
  HYBRID_VECTORS,
  seedElasticsearch,
  vectorOf,
  withRealVectors,
  type BenchVectors,
  seedEmbedded,
} from './seed-items';
import {
  ES_URL,
  createDataset,
  deleteInstallation,
  exactTop,
  gatewayClient,
  machine,
  startService,
  summarize,
  timed,
  RESULTS_DIR,
  writeResult,
  type Engine,
} from './common';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
// A p95 of 400 rested on its 20 slowest requests: the hand-written query's p95 at 100k came out
// 17 % apart between two indices of the same items (2026-11-25). 1,000 give it 50.
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1000);
const WARMUP = 40;
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
const EMBEDDERS = (process.env.BENCH_EMBEDDERS ?? 'hybrid,descriptor')
  .split(',')
  .map((k) => (k === 'descriptor' ? DESCRIPTOR_VECTORS : HYBRID_VECTORS));
/** On as in production, high enough that one client's sequential requests never meet it. */
const RATE_LIMIT_PER_MINUTE = '1000000';

/**
 * The embedded engine on a connection of its own, as at start: how long building the
 * dataset's in-memory index takes, how much memory it holds (heap and typed arrays with the
 * engine alive, less the same once it is released, each after a forced collection: measured
 * around the build instead, the collection of the seeding's garbage made it negative on
 * 2026-11-25), and the engine's own time for the gateway's queries (the gateway adds
 * HTTP, auth and the metering write, which SQLite fsyncs per request).
 */
async function measureEngine(
  app: RunningApp,
  datasetId: string,
  skuOf: (i: number) => string,
  vectors: BenchVectors,
): Promise<Record<string, unknown>> {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const used = () => {
    gc();
    const m = process.memoryUsage();
    // external counts ArrayBuffers and the vector matrices' WebAssembly memories
    return m.heapUsed + m.external;
  };
  const db = openDb(path.join(app.container.config.dataDir, 'store.db'));
  try {
    let engine: EmbeddedSearchEngine | undefined = new EmbeddedSearchEngine(db);
    const t0 = performance.now();
    const estimated = engine.index(datasetId).bytes();
    const buildMs = performance.now() - t0;
    const cat = await app.container.ports.content.catalogue(datasetId);
    const conditionsOf = (q: string) =>
      resolveFilters(parseQ(q), { enabled: {}, catalogue: cat, settingsPath: '' });
    const search = await timeRequests(async (i) => {
      const qy = query(i);
      await engine!.search(datasetId, {
        conditions: conditionsOf(qy.q),
        sort: { field: qy.sort, order: qy.order as 'asc' | 'desc' },
        offset: (qy.page - 1) * qy.limit,
        limit: qy.limit,
      });
    });
    const facets = await timeRequests(async (i) => {
      const lo = 20 + (i % 10) * 5;
      await engine!.figures(datasetId, conditionsOf(`price:${lo}:${lo + 250},instock:true`), {
        facets: ['category', 'color', 'brand'].map((field) => ({ field, disjunctive: false })),
        facetSize: 10,
        stats: [],
        histograms: [],
      });
    });
    const filtered = conditionsOf('category:boots,instock:true');
    const similar = await timeRequests(async (i) => {
      const { vector, embedder } = vectorOf(vectors, skuOf(i));
      await engine!.similar(datasetId, {
        vector,
        embedder,
        conditions: filtered,
        limit: 9,
        excludeIds: [skuOf(i)],
      });
    });
    const held = used();
    engine = undefined;
    const bytes = held - used();
    return {
      index_build_ms: Math.round(buildMs),
      index_bytes: bytes,
      index_bytes_per_100k_items: Math.round((bytes / ITEMS) * 100_000),
      index_estimated_bytes: estimated,
      engine_search_ms: summarize(search),
      engine_facets_ms: summarize(facets),
      engine_similar_filtered_ms: summarize(similar),
    };
  } finally {
    db.close();
  }
}

/** Two ways of asking the same question, timed in alternating order; their answers must agree. */
async function interleaved(
  a: (i: number) => Promise<number>,
  b: (i: number) => Promise<number>,
  c: (i: number) => Promise<number>,
): Promise<{ gateway: number[]; directMs: number[]; ownDslMs: number[] }> {
  const timed = async (f: (i: number) => Promise<number>, i: number) => {
    const t = process.hrtime.bigint();
    const answer = await f(i);
    return { answer, ms: Number(process.hrtime.bigint() - t) / 1e6 };
  };
  const gateway: number[] = [];
  const directMs: number[] = [];
  const ownDslMs: number[] = [];
  for (let i = -WARMUP; i < REQUESTS; i++) {
    const k = Math.abs(i);
    const first = i % 2 ? await timed(a, k) : await timed(b, k);
    const second = i % 2 ? await timed(b, k) : await timed(a, k);
    const [ga, gb] = i % 2 ? [first, second] : [second, first];
    const gc = await timed(c, k);
    if (ga.answer !== gb.answer || gc.answer !== gb.answer)
      throw new Error(
        `round ${i}: the gateway found ${ga.answer}, the direct query ${gb.answer}, the gateway's DSL ${gc.answer}`,
      );
    if (i < 0) continue;
    gateway.push(ga.ms);
    directMs.push(gb.ms);
    ownDslMs.push(gc.ms);
  }
  return { gateway, directMs, ownDslMs };
}

const timeRequests = (run: (i: number) => Promise<void>): Promise<number[]> =>
  timed(run, REQUESTS, WARMUP);

/**
 * kNN recall@10 of the HNSW index against exact search, over the vectors the items were loaded
 * with (real images' when bench/real-vectors.ts has cached enough; random unit vectors, a hard
 * case with no cluster structure, otherwise).
 */
async function hnswRecall(
  gateway: ReturnType<typeof gatewayClient>,
  dsToken: string,
  vectors: BenchVectors,
): Promise<number> {
  const ids = Array.from({ length: ITEMS }, (_, i) => `sku-${String(i).padStart(7, '0')}`);
  const vecs = ids.map((id) => Float32Array.from(vectorOf(vectors, id).vector));
  const QUERIES = 50;
  let hits = 0;
  for (let q = 0; q < QUERIES; q++) {
    const qi = (q * 104729) % ITEMS;
    const exact = new Set(exactTop(vecs, vecs[qi]!, 10, qi).map((i) => ids[i]));
    const r = await gateway.get<{ results: Array<{ id: string }> }>(
      `/orgs/bench/datasets/shoes/similar?id=${ids[qi]}&limit=11`,
      dsToken,
    );
    hits += r.body.results.slice(1).filter((x) => exact.has(x.id)).length;
  }
  return Math.round((hits / (QUERIES * 10)) * 1000) / 1000;
}

/**
 * The listing question as a careful client would write it by hand against the item index
 * (one nested clause per typed field, the price sort on the numeric value), not the gateway's
 * generic translation, which also checks scopes and a field's other types.
 */
function handWritten(i: number): Record<string, unknown> {
  const qy = query(i);
  const lo = 20 + (i % 10) * 5;
  const attr = (f: string, ...filter: object[]) => ({
    nested: { path: 'attrs', query: { bool: { filter: [{ term: { 'attrs.f': f } }, ...filter] } } },
  });
  return {
    // the index's vector field and its stored copy: a careful client fetches neither (the runs
    // of 2026-11-23 fetched the copy, 7.6 KB per hit at 1,420-d, which slowed this side)
    _source: { excludes: ['vector_*', 'embedding_f32'] },
    query: {
      bool: {
        filter: [
          { term: { state: 'processed' } },
          attr('category', { terms: { 'attrs.s': ['boots', 'sneakers', 'loafers'] } }),
          attr('price', { range: { 'attrs.n': { gte: lo, lte: lo + 250 } } }),
          attr('instock', { term: { 'attrs.t': 'b' } }, { term: { 'attrs.s': 'true' } }),
        ],
        must_not: [attr('color', { term: { 'attrs.s': 'pink' } })],
      },
    },
    sort: [
      {
        'attrs.n': {
          order: qy.order,
          nested: { path: 'attrs', filter: { term: { 'attrs.f': 'price' } } },
        },
      },
      { id: 'asc' },
    ],
    from: (qy.page - 1) * qy.limit,
    size: qy.limit,
    track_total_hits: true,
  };
}

async function benchEngine(engine: Engine, stand: BenchVectors): Promise<Record<string, unknown>> {
  const vectors = await withRealVectors(stand, ITEMS);
  const prefix = `bench${Date.now().toString(36)}-`;
  const app = await startService({
    APP_ROLES: 'api',
    RATE_LIMIT_PER_MINUTE,
    // similar compares the seeded vectors (seed-items.ts) with the service's embedder's
    EMBEDDER: vectors.kind,
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: prefix }
      : {}),
  });
  const es = engine === 'elasticsearch' ? new Client({ node: ES_URL }) : undefined;
  // the seed is written with the service's own client (vectors as float32 text); the direct
  // queries use the stock one above, as a hand-written client would
  const writer = es ? esClient(ES_URL) : undefined;
  const client = gatewayClient(app.url!);
  try {
    const { dsToken, datasetId } = await createDataset(app, 'shoes');
    const t0 = Date.now();
    if (es)
      await seedElasticsearch(
        new EsIndices(writer!, prefix, { shards: 1, replicas: 0 }),
        datasetId,
        ITEMS,
        vectors,
      );
    else seedEmbedded(app.container.config.dataDir, datasetId, catalogue(ITEMS), vectors);
    const loadS = (Date.now() - t0) / 1000;
    process.stderr.write(
      `[${engine}, ${vectors.kind}] loaded ${ITEMS} items in ${loadS.toFixed(1)} s\n`,
    );
    // Seeding blocks the event loop for minutes: let the server's overdue keep-alive timers
    // close the idle sockets now, or the first request races them and gets ECONNRESET.
    await new Promise((r) => setTimeout(r, 500));

    let total = -1;
    const viaGateway = async (i: number): Promise<number> => {
      const p = new URLSearchParams(
        Object.entries(query(i)).map(([k, v]): [string, string] => [k, String(v)]),
      );
      const r = await client.get<{ total_results: number; results: unknown[] }>(
        `/orgs/bench/datasets/shoes/search?${p}`,
        dsToken,
      );
      const body = r.body;
      if (r.status !== 200 || body.results.length === 0)
        throw new Error(`search: ${JSON.stringify(body)}`);
      if (i === 0) total = body.total_results;
      return body.total_results;
    };
    const index = `${prefix}items-${datasetId}`;
    const direct = async (i: number): Promise<number> => {
      const r = await es!.search({ index, ...handWritten(i) });
      return (r.hits.total as { value: number }).value;
    };
    // On Elasticsearch, each round asks both ways, in alternating order, so the two series
    // share the machine's state; the totals must agree or the comparison is void.
    // The gateway's own translation sent straight, to split its overhead into query and HTTP.
    const cat = await app.container.ports.content.catalogue(datasetId);
    const ownDsl = async (i: number): Promise<number> => {
      const qy = query(i);
      const conditions = resolveFilters(parseQ(qy.q), {
        enabled: {},
        catalogue: cat,
        settingsPath: '',
      });
      const r = await es!.search({
        index,
        ...searchBody({
          conditions,
          sort: { field: qy.sort, order: qy.order as 'asc' | 'desc' },
          offset: (qy.page - 1) * qy.limit,
          limit: qy.limit,
        }),
      } as never);
      return (r.hits.total as { value: number }).value;
    };
    const { gateway, directMs, ownDslMs } = es
      ? await interleaved(viaGateway, direct, ownDsl)
      : {
          gateway: await timeRequests(async (i) => void (await viaGateway(i))),
          directMs: [],
          ownDslMs: [],
        };
    // similar-by-id: the item plus its 9 nearest, unfiltered and with a q filter
    const skuOf = (i: number) => `sku-${String((i * 7919) % ITEMS).padStart(7, '0')}`;
    const similar = (q: string) =>
      timeRequests(async (i) => {
        const r = await client.get<{ results: unknown[] }>(
          `/orgs/bench/datasets/shoes/similar?id=${skuOf(i)}&limit=10${q}`,
          dsToken,
        );
        const body = r.body;
        if (r.status !== 200 || body.results.length !== 10)
          throw new Error(`similar: ${JSON.stringify(body).slice(0, 300)}`);
      });
    // Analytics facets (contract §10) on three fields over all matches of a varying q.
    const facets = await timeRequests(async (i) => {
      const lo = 20 + (i % 10) * 5;
      const p = new URLSearchParams({
        q: `price:${lo}:${lo + 250},instock:true`,
        facets: 'category,color,brand',
        limit: '0',
      });
      const r = await client.get<{ facets?: Record<string, unknown> }>(
        `/orgs/bench/datasets/shoes/search?${p}`,
        dsToken,
      );
      const body = r.body;
      if (r.status !== 200 || Object.keys(body.facets ?? {}).length !== 3)
        throw new Error(`facets: ${JSON.stringify(body).slice(0, 300)}`);
    });
    const out: Record<string, unknown> = {
      engine,
      date: new Date().toISOString(),
      embedder: vectors.id,
      dimensions: vectors.dimensions,
      vectors: vectors.real ? 'real (bench/real-vectors.ts)' : 'random unit vectors',
      items: ITEMS,
      load_seconds: loadS,
      sample_query: query(0),
      sample_total_results: total,
      gateway_ms: summarize(gateway),
      facets_ms: summarize(facets),
      facets_note: 'GET search?q=price:lo:hi,instock:true&facets=category,color,brand&limit=0',
      similar_ms: summarize(await similar('')),
      similar_filtered_ms: summarize(await similar('&q=category:boots,instock:true')),
      similar_note: `GET similar?id=…&limit=10 on ${vectors.dimensions}-dimension ${vectors.real ? 'vectors of real images' : 'random unit vectors'}; filtered adds q=category:boots,instock:true`,
      ...(es ? {} : await measureEngine(app, datasetId, skuOf, vectors)),
    };
    if (es) {
      out.hnsw_recall_at_10 = await hnswRecall(client, dsToken, vectors);
      const d = summarize(directMs);
      out.direct_elasticsearch_ms = d;
      out.direct_note =
        'the same question written by hand (handWritten()), interleaved with the gateway';
      out.gateway_dsl_direct_ms = summarize(ownDslMs);
      out.overhead_ratio_p50 = Math.round((summarize(gateway).p50 / d.p50) * 100) / 100;
      out.overhead_ratio_p95 = Math.round((summarize(gateway).p95 / d.p95) * 100) / 100;
      const stats = await es.indices.stats({ index, metric: 'store' });
      const bytes = stats._all.primaries?.store?.size_in_bytes ?? 0;
      out.index_store_bytes = bytes;
      out.index_store_bytes_per_item = Math.round(bytes / ITEMS);
    }
    return out;
  } finally {
    await client.close();
    await es?.close();
    await writer?.close();
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function main(): Promise<void> {
  const runs: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES)
    for (const vectors of EMBEDDERS) runs.push(await benchEngine(engine, vectors));
  // Measuring one engine or embedder keeps the others' last numbers (each run has its date).
  const previous = path.join(RESULTS_DIR, 'search-latency.json');
  const key = (r: Record<string, unknown>) =>
    `${String(r.engine)} ${String(r.dimensions)} ${String(r.items)}`;
  const measured = new Set(runs.map(key));
  if (fs.existsSync(previous))
    for (const old of (JSON.parse(fs.readFileSync(previous, 'utf8')) as { runs: typeof runs }).runs)
      if (!measured.has(key(old)) && old.dimensions !== undefined) runs.push(old);
  runs.sort((a, b) => key(a).localeCompare(key(b)));
  const result = {
    benchmark: 'search-latency',
    date: new Date().toISOString(),
    machine: machine(),
    requests: REQUESTS,
    warmup: WARMUP,
    note: 'sequential requests from one client on the same machine as the service and Elasticsearch',
    runs,
  };
  const file = writeResult('search-latency', result);
  process.stdout.write(`${JSON.stringify(runs, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
