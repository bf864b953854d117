/**
 * Results grouped by a field (contract §13, issue 36): 100,000 processed items in 25,000
 * groups of a `parent` field, on both engines. Through the REST gateway, in one loop and in
 * rotating order, the same search with facets three ways: ungrouped, `group=parent`, and
 * `group=parent&group_size=3`; the goal is grouped p95 ≤ 2 × ungrouped p95. Two filters: one
 * leaving about 20,000 matching groups (above the 10,000 counted exactly, so Elasticsearch
 * estimates and says so) and one leaving about 5,000 (exact on both engines). Then the engine's
 * own calls behind each request, timed the same way, and on Elasticsearch every request the
 * grouped search sends, by kind, to show where the time goes.
 *
 *   npm run bench:grouping   (BENCH_ITEMS, BENCH_GROUPS, BENCH_REQUESTS, BENCH_ENGINES to change)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import {
  groupFacets,
  searchGroups,
  type Search,
} from 'visual-search-service/dist/adapters/elasticsearch/groups';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { RunningApp } from 'visual-search-service/dist/app/start';
import type { FiguresSpec } from 'visual-search-service/dist/domain/figures';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import type { Condition } from 'visual-search-service/dist/query/ast';
import { parseQ } from 'visual-search-service/dist/query/parse';
import { resolveFilters } from 'visual-search-service/dist/query/resolve';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  createDataset,
  deleteInstallation,
  gatewayClient,
  machine,
  rng,
  startService,
  summarize,
  writeResult,
  type Engine,
} from './common';
import { DESCRIPTOR_VECTORS, seedEmbedded, seedElasticsearch } from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
const GROUPS = Number(process.env.BENCH_GROUPS ?? Math.round(ITEMS / 4));
/** Requests of each series and filter after the warm-up. */
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 400);
const WARMUP = 40;
/** Rounds of the engine-level and per-request timings (after WARMUP / 4 unmeasured ones). */
const ENGINE_ROUNDS = Number(process.env.BENCH_ENGINE_ROUNDS ?? 60);
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
const RATE_LIMIT_PER_MINUTE = '1000000';
const FIELD = 'parent';
const FACETS = ['category', 'color', 'brand'];
const EXACT_UP_TO = 10_000;

/** Items without `parent`, each a group of its own: one in a hundred. */
const isSingle = (i: number): boolean => i % 100 === 50;

/**
 * The shop catalogue of catalogue.ts with variants: GROUPS groups in all, of which the items
 * without `parent` (1 %) are groups of one and the rest are parents of 1–7 variants (uniform,
 * corrected to add up), which share their parent's category, brand and title and differ in
 * colour, size, price and stock. Variants of one parent have neighbouring ids.
 */
function* groupedCatalogue(n: number, groups: number): Generator<StoredItem> {
  let singles = 0;
  for (let i = 0; i < n; i++) if (isSingle(i)) singles++;
  const parents = groups - singles;
  const r = rng(7);
  const sizes = Array.from({ length: parents }, () => 1 + Math.floor(r() * 7));
  let sum = sizes.reduce((a, b) => a + b, 0);
  while (sum !== n - singles) {
    const k = Math.floor(r() * parents);
    const step = sum > n - singles ? -1 : 1;
    if (sizes[k]! + step < 1 || sizes[k]! + step > 7) continue;
    sizes[k]! += step;
    sum += step;
  }
  let p = 0;
  let left = sizes[0]!;
  let first: StoredItem['metadata'] | undefined;
  let i = 0;
  for (const it of catalogue(n)) {
    if (isSingle(i++)) {
      yield it;
      continue;
    }
    if (left === 0) {
      p++;
      left = sizes[p]!;
      first = undefined;
    }
    left--;
    const m = it.metadata;
    first ??= m;
    const { category, brand } = first;
    yield {
      ...it,
      metadata: {
        ...m,
        category,
        brand,
        title: `${String(category)} by ${String(brand)}`,
        [FIELD]: `p-${String(p).padStart(6, '0')}`,
      },
    };
  }
}

/** The two filters: about 20,000 matching groups (estimated on Elasticsearch), about 5,000. */
const FILTERS = {
  wide: (lo: number) => `price:${lo}:${lo + 250},instock:true`,
  narrow: (lo: number) => `category:boots|sneakers,price:${lo}:${lo + 250},instock:true`,
};
type Filter = keyof typeof FILTERS;

type Series = 'ungrouped' | 'grouped' | 'grouped_size3';
const SERIES: Series[] = ['ungrouped', 'grouped', 'grouped_size3'];

/**
 * Round i's question for request `slot` of the round: the order and the page vary, and the
 * price window moves by 0.2 per request, so no body repeats within 125 rounds. Elasticsearch's
 * shard request cache keeps the answers of `size: 0` bodies (facets, group totals, group facets)
 * until a refresh: a grouped request right after another with the same q, or a window seen ten
 * rounds earlier, was answered from it (2026-11-26).
 */
function question(filter: Filter, i: number, slot = 0) {
  const lo = 20 + ((i * 8 + slot) % 1000) / 5;
  return {
    q: FILTERS[filter](lo),
    sort: 'price',
    order: (i % 2 ? 'asc' : 'desc') as 'asc' | 'desc',
    page: 1 + (i % 5),
    limit: 24,
  };
}

function params(filter: Filter, i: number, series: Series): string {
  const qy = question(filter, i, SERIES.indexOf(series));
  const p = new URLSearchParams({
    q: qy.q,
    facets: FACETS.join(','),
    sort: qy.sort,
    order: qy.order,
    page: String(qy.page),
    limit: String(qy.limit),
  });
  if (series !== 'ungrouped') p.set('group', FIELD);
  if (series === 'grouped_size3') p.set('group_size', '3');
  return p.toString();
}

interface Answer {
  total_results: number;
  total_groups?: number;
  total_groups_exact?: boolean;
  results: Array<{ group?: { count: number; items?: unknown[] } }>;
  facets?: Record<string, { exact?: boolean }>;
}

const ms = (t: bigint): number => Number(process.hrtime.bigint() - t) / 1e6;
const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100;
const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];

/** The three series through the gateway, rotating which goes first; answers checked. */
async function gatewayLoop(
  client: ReturnType<typeof gatewayClient>,
  dsToken: string,
  filter: Filter,
): Promise<Record<string, unknown>> {
  const times: Record<Series, number[]> = { ungrouped: [], grouped: [], grouped_size3: [] };
  const totals: number[] = [];
  const groupTotals: number[] = [];
  const exactSeen = new Set<boolean>();
  const facetExactSeen = new Set<boolean>();
  let moreItems = 0;
  for (let i = -WARMUP; i < REQUESTS; i++) {
    const k = i + WARMUP; // every round its own question, the warm-up's too
    const answers: Partial<Record<Series, Answer>> = {};
    for (let j = 0; j < SERIES.length; j++) {
      const series = SERIES[(k + j) % SERIES.length]!;
      const t = process.hrtime.bigint();
      const r = await client.get<Answer>(
        `/orgs/bench/datasets/shoes/search?${params(filter, k, series)}`,
        dsToken,
      );
      const took = ms(t);
      const body = r.body;
      if (
        r.status !== 200 ||
        body.results.length !== 24 ||
        Object.keys(body.facets ?? {}).length !== FACETS.length
      )
        throw new Error(`${series} ${filter}: ${JSON.stringify(body).slice(0, 400)}`);
      answers[series] = body;
      if (i >= 0) times[series].push(took);
    }
    const u = answers.ungrouped!;
    for (const s of ['grouped', 'grouped_size3'] as const) {
      const g = answers[s]!;
      // the windows of a round differ by 0.2 or 0.4 (of 250): the totals by well under 1 %
      if (
        Math.abs(g.total_results - u.total_results) > u.total_results / 100 ||
        g.total_groups === undefined ||
        g.total_groups > g.total_results
      )
        throw new Error(`round ${i}: ${s} found ${g.total_results}, ungrouped ${u.total_results}`);
      if (!g.results.every((e) => e.group && e.group.count >= 1))
        throw new Error(`round ${i}: ${s} has an entry without its group`);
      exactSeen.add(g.total_groups_exact!);
      for (const f of Object.values(g.facets!)) facetExactSeen.add(f.exact !== false);
      groupTotals.push(g.total_groups);
    }
    moreItems += answers.grouped_size3!.results.filter(
      (e) => (e.group?.items?.length ?? 0) > 0,
    ).length;
    totals.push(u.total_results);
  }
  const [u, g, g3] = SERIES.map((s) => summarize(times[s]));
  return {
    question: `GET search?${params(filter, 0, 'ungrouped')} (price window, order and page 1–5 vary); grouped adds group=${FIELD}, and group_size=3`,
    ungrouped_ms: u,
    grouped_ms: g,
    grouped_size3_ms: g3,
    ratio_p95: ratio(g!.p95, u!.p95),
    ratio_p50: ratio(g!.p50, u!.p50),
    ratio_p95_size3: ratio(g3!.p95, u!.p95),
    ratio_p50_size3: ratio(g3!.p50, u!.p50),
    total_results: range(totals),
    total_groups: range(groupTotals),
    total_groups_exact_seen: [...exactSeen],
    facets_exact_seen: [...facetExactSeen],
    size3_entries_with_more_items: moreItems,
  };
}

/**
 * What the gateway's search calls on the engine, timed in the same rotating loop without HTTP,
 * auth or metering: the page (ungrouped, grouped) and the facets (item counts, group counts).
 * The gateway runs a request's page and facets in parallel.
 */
async function engineLoop(
  app: RunningApp,
  datasetId: string,
  filter: Filter,
): Promise<Record<string, unknown>> {
  const engine = app.container.ports.engine;
  const cat = await app.container.ports.content.catalogue(datasetId);
  const conditionsOf = (q: string): Condition[] =>
    resolveFilters(parseQ(q), { enabled: {}, catalogue: cat, settingsPath: '' });
  const spec: FiguresSpec = {
    facets: FACETS.map((field) => ({ field, disjunctive: false })),
    facetSize: 10,
    stats: [],
    histograms: [],
  };
  const groupedPage = (i: number, slot: number, size: number) => {
    const qy = question(filter, i, slot);
    return engine.searchGroups(datasetId, {
      conditions: conditionsOf(qy.q),
      sort: { field: qy.sort, order: qy.order },
      offset: (qy.page - 1) * qy.limit,
      limit: qy.limit,
      group: { field: FIELD, size },
      exactUpTo: EXACT_UP_TO,
    });
  };
  const calls: Record<string, (i: number, slot: number) => Promise<unknown>> = {
    page: (i, slot) => {
      const qy = question(filter, i, slot);
      return engine.search(datasetId, {
        conditions: conditionsOf(qy.q),
        sort: { field: qy.sort, order: qy.order },
        offset: (qy.page - 1) * qy.limit,
        limit: qy.limit,
      });
    },
    grouped_page: (i, slot) => groupedPage(i, slot, 1),
    grouped_page_size3: (i, slot) => groupedPage(i, slot, 3),
    facets: (i, slot) => engine.figures(datasetId, conditionsOf(question(filter, i, slot).q), spec),
    group_facets: (i, slot) =>
      engine.figures(datasetId, conditionsOf(question(filter, i, slot).q), {
        ...spec,
        groupBy: FIELD,
        exactUpTo: EXACT_UP_TO,
      }),
  };
  const names = Object.keys(calls);
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = -WARMUP / 4; i < ENGINE_ROUNDS; i++) {
    const k = i + WARMUP / 4;
    for (let j = 0; j < names.length; j++) {
      const name = names[(k + j) % names.length]!;
      const t = process.hrtime.bigint();
      await calls[name]!(k, names.indexOf(name));
      if (i >= 0) times[name]!.push(ms(t));
    }
  }
  return Object.fromEntries(names.map((n) => [`${n}_ms`, summarize(times[n]!)]));
}

/** Which of the grouping module's requests a body is (groups-dsl.ts). */
function kindOf(body: Record<string, any>): string {
  const aggs = body.aggs as Record<string, any> | undefined;
  if (aggs?.g && aggs.single && body.track_total_hits === true) return 'group_totals';
  if (aggs?.g) return 'facet_partition';
  if (aggs?.v && aggs.lacking) return 'facet_estimate';
  if (aggs?.k0) return 'group_counts';
  if (Array.isArray(body._source)) return 'scan';
  if (body.query?.terms?.id) return 'page_items';
  return 'group_items';
}

/**
 * On Elasticsearch, the grouping module's own calls (searchGroups, groupFacets) on a client of
 * the bench's, every request timed by kind: how many a call sends, and each one's time at the
 * client and Elasticsearch's own `took`.
 */
async function esRequests(
  app: RunningApp,
  datasetId: string,
  index: string,
  filter: Filter,
): Promise<Record<string, unknown>> {
  const client = esClient(ES_URL);
  const cat = await app.container.ports.content.catalogue(datasetId);
  const perKind = new Map<string, { ms: number[]; took: number[] }>();
  let measuring = false;
  const search: Search = async (body, filterPath) => {
    const t = process.hrtime.bigint();
    const r = (await client.search({
      index,
      ...body,
      ...(filterPath ? { filter_path: filterPath } : {}),
    } as never)) as unknown as Awaited<ReturnType<Search>> & { took?: number };
    if (measuring) {
      const kind = kindOf(body);
      const e = perKind.get(kind) ?? { ms: [], took: [] };
      e.ms.push(ms(t));
      if (typeof r.took === 'number') e.took.push(r.took);
      perKind.set(kind, e);
    }
    return r;
  };
  const spec: FiguresSpec & { groupBy: string } = {
    facets: FACETS.map((field) => ({ field, disjunctive: false })),
    facetSize: 10,
    stats: [],
    histograms: [],
    groupBy: FIELD,
    exactUpTo: EXACT_UP_TO,
  };
  const wall: Record<string, number[]> = { search_groups: [], group_facets: [] };
  try {
    for (let i = -WARMUP / 4; i < ENGINE_ROUNDS; i++) {
      const k = i + WARMUP / 4;
      measuring = i >= 0;
      // the two calls on windows of their own: the second would find the group totals cached
      const qy = question(filter, k);
      const conditionsOf = (slot: number): Condition[] =>
        resolveFilters(parseQ(question(filter, k, slot).q), {
          enabled: {},
          catalogue: cat,
          settingsPath: '',
        });
      let t = process.hrtime.bigint();
      await searchGroups(search, {
        conditions: conditionsOf(0),
        sort: { field: qy.sort, order: qy.order },
        offset: (qy.page - 1) * qy.limit,
        limit: qy.limit,
        group: { field: FIELD, size: 1 },
        exactUpTo: EXACT_UP_TO,
      });
      if (measuring) wall.search_groups!.push(ms(t));
      t = process.hrtime.bigint();
      await groupFacets(search, conditionsOf(1), spec);
      if (measuring) wall.group_facets!.push(ms(t));
    }
  } finally {
    await client.close();
  }
  return {
    calls: ENGINE_ROUNDS,
    search_groups_ms: summarize(wall.search_groups!),
    group_facets_ms: summarize(wall.group_facets!),
    requests: Object.fromEntries(
      [...perKind].map(([kind, e]) => [
        kind,
        {
          per_call: Math.round((e.ms.length / ENGINE_ROUNDS) * 100) / 100,
          client_ms: summarize(e.ms),
          took_ms: summarize(e.took),
        },
      ]),
    ),
  };
}

async function benchEngine(engine: Engine): Promise<Record<string, unknown>> {
  const prefix = `benchgrp${Date.now().toString(36)}-`;
  const app = await startService({
    APP_ROLES: 'api',
    RATE_LIMIT_PER_MINUTE,
    EMBEDDER: 'descriptor',
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: prefix }
      : {}),
  });
  const writer = engine === 'elasticsearch' ? esClient(ES_URL) : undefined;
  const client = gatewayClient(app.url!);
  try {
    const { dsToken, datasetId } = await createDataset(app, 'shoes');
    const t0 = Date.now();
    const indices = writer ? new EsIndices(writer, prefix, { shards: 1, replicas: 0 }) : undefined;
    if (indices)
      await seedElasticsearch(
        indices,
        datasetId,
        ITEMS,
        DESCRIPTOR_VECTORS,
        groupedCatalogue(ITEMS, GROUPS),
      );
    else
      seedEmbedded(
        app.container.config.dataDir,
        datasetId,
        groupedCatalogue(ITEMS, GROUPS),
        DESCRIPTOR_VECTORS,
      );
    const loadS = (Date.now() - t0) / 1000;
    process.stderr.write(`[${engine}] loaded ${ITEMS} items in ${loadS.toFixed(1)} s\n`);
    // the seeding blocked the event loop: let overdue keep-alive timers close idle sockets
    await new Promise((r) => setTimeout(r, 500));
    const filters: Record<string, unknown> = {};
    for (const filter of Object.keys(FILTERS) as Filter[]) {
      const t1 = Date.now();
      const gateway = await gatewayLoop(client, dsToken, filter);
      const engineCalls = await engineLoop(app, datasetId, filter);
      filters[filter] = {
        ...gateway,
        engine_calls: engineCalls,
        ...(indices
          ? { es_requests: await esRequests(app, datasetId, indices.items(datasetId), filter) }
          : {}),
      };
      process.stderr.write(
        `[${engine}] ${filter}: ${JSON.stringify(filters[filter])} (${((Date.now() - t1) / 1000).toFixed(0)} s)\n`,
      );
    }
    return {
      engine,
      date: new Date().toISOString(),
      items: ITEMS,
      groups: GROUPS,
      load_seconds: loadS,
      filters,
    };
  } finally {
    await client.close();
    await writer?.close();
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function esHeap(): Promise<string | undefined> {
  try {
    const r = await fetch(
      `${ES_URL}/_nodes/stats/jvm?filter_path=nodes.*.jvm.mem.heap_max_in_bytes`,
    );
    const body = (await r.json()) as {
      nodes: Record<string, { jvm: { mem: { heap_max_in_bytes: number } } }>;
    };
    const bytes = Object.values(body.nodes)[0]?.jvm.mem.heap_max_in_bytes;
    return bytes === undefined ? undefined : `${Math.round(bytes / 2 ** 20)} MiB`;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  let singles = 0;
  for (let i = 0; i < ITEMS; i++) if (isSingle(i)) singles++;
  const runs: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES) runs.push(await benchEngine(engine));
  // Measuring one engine keeps the other's last run (each run has its date).
  const previous = path.join(RESULTS_DIR, 'grouping.json');
  if (fs.existsSync(previous))
    for (const old of (JSON.parse(fs.readFileSync(previous, 'utf8')) as { runs: typeof runs }).runs)
      if (!runs.some((r) => r.engine === old.engine && r.items === old.items)) runs.push(old);
  const result = {
    benchmark: 'grouping',
    date: new Date().toISOString(),
    commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(),
    machine: machine(),
    elasticsearch_heap: await esHeap(),
    parameters: {
      items: ITEMS,
      groups: GROUPS,
      parents: GROUPS - singles,
      items_without_parent: singles,
      variants_per_parent: `1–7 uniform, mean ${((ITEMS - singles) / (GROUPS - singles)).toFixed(2)}; variants share category, brand and title`,
      vectors: `random unit vectors, ${DESCRIPTOR_VECTORS.dimensions}-d (not queried)`,
      requests_per_series: REQUESTS,
      warmup: WARMUP,
      engine_rounds: ENGINE_ROUNDS,
      facets: FACETS,
      filters: { wide: FILTERS.wide(20), narrow: FILTERS.narrow(20) },
      exact_up_to: EXACT_UP_TO,
    },
    note: 'sequential requests from one client on the same machine as the service and Elasticsearch; the three series of a round in rotating order; ratio = grouped ÷ ungrouped of the same filter',
    runs,
  };
  const file = writeResult('grouping', result);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
