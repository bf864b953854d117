/**
 * Discovery controls on `similar` (contract §15, issue 37): 100,000 processed items, on both
 * engines, through the REST gateway. Each round asks about one item six ways, in rotating
 * order (reversed every other round): plain `similar`, `diversity=0.5`, `page=10`,
 * `exhaustive=true`, and plain and exhaustive with a 1 % filter (`q=n:lo:hi` over the field
 * n = 0…items−1, a window of items / 100 that moves every round). Every mode is `limit=10`.
 * Goals: diversity and page 10 within 2 × plain's p95; exhaustive with the 1 % filter within
 * 2 × plain's p95 (also given against the filtered approximate search of the same window); an
 * unfiltered exhaustive scan under 500 ms at p95 on the embedded engine. The answers are
 * checked (sizes, the target first, total_results, the filter, and the exhaustive ranking
 * with the filter against a brute force over the seeded vectors), and the results of the
 * approximate searches are compared with the exact ones of the same round.
 *
 *   npm run bench:discovery   (BENCH_ITEMS, BENCH_ROUNDS, BENCH_ENGINES, BENCH_EMBEDDER to change)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  createDataset,
  deleteInstallation,
  gatewayClient,
  machine,
  startService,
  summarize,
  writeResult,
  type Engine,
} from './common';
import {
  DESCRIPTOR_VECTORS,
  HYBRID_VECTORS,
  seedElasticsearch,
  seedEmbedded,
  vectorOf,
  withRealVectors,
  type BenchVectors,
} from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
/** Measured rounds; each asks every mode once. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 400);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20);
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
/** The service's default embedder (1,420-d) unless BENCH_EMBEDDER=descriptor (140-d). */
const STAND: BenchVectors =
  process.env.BENCH_EMBEDDER === 'descriptor' ? DESCRIPTOR_VECTORS : HYBRID_VECTORS;
const RATE_LIMIT_PER_MINUTE = '1000000';
const LIMIT = 10;
const DIVERSITY = 0.5;
const PAGE = 10;
/** The 1 % filter's window on n. */
const WINDOW = Math.max(1, Math.round(ITEMS / 100));
const GOAL_RATIO = 2;
const GOAL_SCAN_MS = 500;

/** The shop catalogue of catalogue.ts, each item with its number n = 0…items−1. */
function* numbered(n: number): Generator<StoredItem> {
  let i = 0;
  for (const it of catalogue(n)) yield { ...it, metadata: { ...it.metadata, n: i++ } };
}

const skuOf = (i: number): string => `sku-${String(i).padStart(7, '0')}`;

/** Round k's item (7,919 is prime, so no item repeats within `items` rounds) and window. */
function roundOf(k: number): { index: number; id: string; lo: number; hi: number } {
  const index = (k * 7919 + 13) % ITEMS;
  const lo = (k * 9973 + 101) % (ITEMS - WINDOW + 1);
  return { index, id: skuOf(index), lo, hi: lo + WINDOW - 1 };
}

type Mode =
  'plain' | 'diversity' | 'page10' | 'exhaustive' | 'plain_filter_1pct' | 'exhaustive_filter_1pct';
const MODES: Mode[] = [
  'plain',
  'diversity',
  'page10',
  'exhaustive',
  'plain_filter_1pct',
  'exhaustive_filter_1pct',
];

function params(mode: Mode, k: number): string {
  const r = roundOf(k);
  const p = new URLSearchParams({ id: r.id, limit: String(LIMIT), fields: 'n' });
  if (mode === 'diversity') p.set('diversity', String(DIVERSITY));
  if (mode === 'page10') p.set('page', String(PAGE));
  if (mode.endsWith('_filter_1pct')) p.set('q', `n:${r.lo}:${r.hi}`);
  if (mode.startsWith('exhaustive')) p.set('exhaustive', 'true');
  return p.toString();
}

interface Answer {
  results: Array<{ id: string; score?: number; metadata: { n?: number } }>;
  total_results?: number;
}

/** Throws unless the answer is what §15 promises for the mode. */
function check(mode: Mode, k: number, a: Answer): void {
  const r = roundOf(k);
  const ids = a.results.map((e) => e.id);
  const fail = (why: string): never => {
    throw new Error(
      `${mode}, round ${k} (${params(mode, k)}): ${why}: ${JSON.stringify(a).slice(0, 400)}`,
    );
  };
  if (ids.length !== LIMIT) fail(`${ids.length} results, ${LIMIT} asked`);
  if (new Set(ids).size !== ids.length) fail('a repeated result');
  if (mode === 'page10') {
    if (ids.includes(r.id)) fail('the target on page 10');
  } else if (ids[0] !== r.id) fail('the target is not first');
  if (mode.endsWith('_filter_1pct'))
    for (const e of a.results.slice(1))
      if (e.metadata.n === undefined || e.metadata.n < r.lo || e.metadata.n > r.hi)
        fail(`${e.id} (n=${e.metadata.n}) outside the filter`);
  if (mode === 'exhaustive' && a.total_results !== ITEMS - 1)
    fail(`total_results ${a.total_results}, ${ITEMS - 1} expected`);
  if (mode === 'exhaustive_filter_1pct') {
    const expected = WINDOW - (r.index >= r.lo && r.index <= r.hi ? 1 : 0);
    if (a.total_results !== expected)
      fail(`total_results ${a.total_results}, ${expected} expected`);
  }
  if (!mode.startsWith('exhaustive') && a.total_results !== undefined)
    fail('total_results without exhaustive');
}

/** The share of the exact answer's results (the target left out) the approximate one found. */
function overlap(approximate: Answer, exact: Answer): number {
  const want = exact.results.slice(1).map((e) => e.id);
  const got = new Set(approximate.results.map((e) => e.id));
  return want.filter((id) => got.has(id)).length / want.length;
}

/**
 * Throws unless the exhaustive answer with the 1 % filter is the brute-force ranking of the
 * window's items by the seeded vectors (the target left out): at each place the cosine of the
 * item given equals the exact one's (ties may swap), and its score is (1 + cosine) / 2.
 */
function checkExact(vectors: BenchVectors, k: number, a: Answer): void {
  const r = roundOf(k);
  const q = vectorOf(vectors, r.id).vector;
  const cos = (id: string): number => {
    const v = vectorOf(vectors, id).vector;
    let [d, vv, qq] = [0, 0, 0];
    for (let j = 0; j < v.length; j++) {
      d += v[j]! * q[j]!;
      vv += v[j]! * v[j]!;
      qq += q[j]! * q[j]!;
    }
    return d / Math.sqrt(vv * qq);
  };
  const exact: number[] = [];
  for (let n = r.lo; n <= r.hi; n++) if (n !== r.index) exact.push(cos(skuOf(n)));
  exact.sort((x, y) => y - x);
  a.results.slice(1).forEach((e, place) => {
    const c = cos(e.id);
    if (Math.abs(c - exact[place]!) > 1e-4 || Math.abs((e.score ?? -1) - (1 + c) / 2) > 1e-4)
      throw new Error(
        `exhaustive_filter_1pct, round ${k}: place ${place + 1} is ${e.id} (cosine ${c}, score ${e.score}), the exact cosine there is ${exact[place]}`,
      );
  });
}

const ms = (t: bigint): number => Number(process.hrtime.bigint() - t) / 1e6;
const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100;
const mean = (xs: number[]): number =>
  Math.round((xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)) * 1000) / 1000;

async function benchEngine(engine: Engine): Promise<Record<string, unknown>> {
  const vectors = await withRealVectors(STAND, ITEMS);
  const prefix = `benchdisc${Date.now().toString(36)}-`;
  const app = await startService({
    APP_ROLES: 'api',
    RATE_LIMIT_PER_MINUTE,
    // similar compares the seeded vectors (seed-items.ts) with the service's embedder's
    EMBEDDER: vectors.kind,
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: prefix }
      : {}),
  });
  const writer = engine === 'elasticsearch' ? esClient(ES_URL) : undefined;
  const client = gatewayClient(app.url!);
  try {
    const { dsToken, datasetId } = await createDataset(app, 'shoes');
    const t0 = Date.now();
    if (writer)
      await seedElasticsearch(
        new EsIndices(writer, prefix, { shards: 1, replicas: 0 }),
        datasetId,
        ITEMS,
        vectors,
        numbered(ITEMS),
      );
    else seedEmbedded(app.container.config.dataDir, datasetId, numbered(ITEMS), vectors);
    const loadS = (Date.now() - t0) / 1000;
    process.stderr.write(
      `[${engine}, ${vectors.dimensions}-d] loaded ${ITEMS} items in ${loadS.toFixed(1)} s\n`,
    );
    // the seeding blocked the event loop: let overdue keep-alive timers close idle sockets
    await new Promise((r) => setTimeout(r, 500));

    const times = Object.fromEntries(MODES.map((m) => [m, [] as number[]])) as Record<
      Mode,
      number[]
    >;
    const found = { unfiltered: [] as number[], filter_1pct: [] as number[] };
    const t1 = Date.now();
    for (let i = -WARMUP; i < ROUNDS; i++) {
      const k = i + WARMUP; // every round its own item and window, the warm-up's too
      const answers: Partial<Record<Mode, Answer>> = {};
      for (let j = 0; j < MODES.length; j++) {
        // rotating, and reversed every other round: each mode in each place, after each other
        const mode = MODES[(k + (k % 2 ? MODES.length - j : j)) % MODES.length]!;
        const t = process.hrtime.bigint();
        const r = await client.get<Answer>(
          `/orgs/bench/datasets/shoes/similar?${params(mode, k)}`,
          dsToken,
        );
        const took = ms(t);
        if (r.status !== 200)
          throw new Error(`${mode} (${params(mode, k)}): ${r.status} ${JSON.stringify(r.body)}`);
        check(mode, k, r.body);
        answers[mode] = r.body;
        if (i >= 0) times[mode].push(took);
      }
      // outside the timed requests: the client's own brute force over the window
      checkExact(vectors, k, answers.exhaustive_filter_1pct!);
      if (i < 0) continue;
      found.unfiltered.push(overlap(answers.plain!, answers.exhaustive!));
      found.filter_1pct.push(overlap(answers.plain_filter_1pct!, answers.exhaustive_filter_1pct!));
      if ((i + 1) % 100 === 0)
        process.stderr.write(
          `[${engine}] ${i + 1}/${ROUNDS} rounds, ${((Date.now() - t1) / 1000).toFixed(0)} s\n`,
        );
    }
    const s = Object.fromEntries(MODES.map((m) => [m, summarize(times[m])])) as Record<
      Mode,
      ReturnType<typeof summarize>
    >;
    const vs = (m: Mode, base: Mode) => ({
      p95: ratio(s[m].p95, s[base].p95),
      p50: ratio(s[m].p50, s[base].p50),
    });
    const ratios = {
      diversity_vs_plain: vs('diversity', 'plain'),
      page10_vs_plain: vs('page10', 'plain'),
      exhaustive_filter_1pct_vs_plain: vs('exhaustive_filter_1pct', 'plain'),
      exhaustive_filter_1pct_vs_plain_filter_1pct: vs(
        'exhaustive_filter_1pct',
        'plain_filter_1pct',
      ),
      exhaustive_vs_plain: vs('exhaustive', 'plain'),
      plain_filter_1pct_vs_plain: vs('plain_filter_1pct', 'plain'),
    };
    const within = (m: Mode, base: Mode) => ({
      goal: `${m} p95 ≤ ${GOAL_RATIO} × ${base} p95`,
      ratio_p95: ratio(s[m].p95, s[base].p95),
      met: s[m].p95 <= GOAL_RATIO * s[base].p95,
    });
    const goals: Record<string, unknown> = {
      diversity: within('diversity', 'plain'),
      page10: within('page10', 'plain'),
      exhaustive_filter_1pct: {
        ...within('exhaustive_filter_1pct', 'plain'),
        against_filtered: within('exhaustive_filter_1pct', 'plain_filter_1pct'),
      },
      ...(engine === 'embedded'
        ? {
            exhaustive_scan: {
              goal: `exhaustive (no filter) p95 < ${GOAL_SCAN_MS} ms on the embedded engine`,
              p95_ms: s.exhaustive.p95,
              met: s.exhaustive.p95 < GOAL_SCAN_MS,
            },
          }
        : {}),
    };
    return {
      engine,
      date: new Date().toISOString(),
      items: ITEMS,
      embedder: vectors.id,
      dimensions: vectors.dimensions,
      vectors: vectors.real ? 'real (bench/real-vectors.ts)' : 'random unit vectors',
      load_seconds: loadS,
      measure_seconds: (Date.now() - t1) / 1000,
      ms: s,
      ratios,
      goals,
      // the approximate answers against the exact ones of the same round (target left out)
      approximate_found_of_exact: {
        unfiltered: mean(found.unfiltered),
        filter_1pct: mean(found.filter_1pct),
      },
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
  const runs: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES) runs.push(await benchEngine(engine));
  // Measuring one engine keeps the other's last run (each run has its date).
  const previous = path.join(RESULTS_DIR, 'discovery.json');
  const key = (r: Record<string, unknown>) =>
    `${String(r.engine)} ${String(r.dimensions)} ${String(r.items)}`;
  if (fs.existsSync(previous))
    for (const old of (JSON.parse(fs.readFileSync(previous, 'utf8')) as { runs: typeof runs }).runs)
      if (!runs.some((r) => key(r) === key(old))) runs.push(old);
  const result = {
    benchmark: 'discovery',
    date: new Date().toISOString(),
    commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(),
    machine: machine(),
    elasticsearch_heap: ENGINES.includes('elasticsearch') ? await esHeap() : undefined,
    parameters: {
      items: ITEMS,
      rounds: ROUNDS,
      warmup_rounds: WARMUP,
      limit: LIMIT,
      diversity: DIVERSITY,
      page: PAGE,
      filter_1pct: `q=n:lo:lo+${WINDOW - 1} (${WINDOW} of ${ITEMS} items; lo moves every round)`,
      modes: Object.fromEntries(MODES.map((m) => [m, `GET similar?${params(m, 0)}`])),
    },
    note: 'sequential requests from one client on the same machine as the service and Elasticsearch; one item per round (7,919 apart, none repeated) asked the six ways in rotating order, reversed every other round; ratio = mode ÷ plain of the same rounds; approximate_found_of_exact = mean share of the exact answer (target left out) that the approximate answer of the same round holds',
    runs,
  };
  const file = writeResult('discovery', result);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
