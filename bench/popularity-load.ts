/**
 * What tracking costs search (contract §14, issue 36): a dataset receiving 100 track events per
 * second (clicks and purchases with qty, one event per request, open loop) while the service
 * rolls them up into service_popularity / service_purchases, against the same search with no
 * events. One process with the api and worker roles (the roll-up runs in workers), on each
 * engine. Quiet and loaded rounds are interleaved and counterbalanced (quiet, load, load,
 * quiet, …) so a drift over the run weighs on both alike; each round is long enough for
 * several roll-up passes. Goal: search p95 under load ≤ 1.2 × quiet.
 *
 *   npm run bench:popularity   (BENCH_ITEMS, BENCH_RATE, BENCH_ROUNDS = rounds per mode,
 *                               BENCH_ROUND_SECONDS, BENCH_ENGINES; experiments, written to the
 *                               temp directory: BENCH_ROLLUP=off, BENCH_PASS_MS)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import { LIMITS } from 'visual-search-service/dist/domain/limits';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  V2,
  createDataset,
  deleteInstallation,
  gatewayClient,
  machine,
  median,
  rng,
  startService,
  summarize,
  writeResult,
  type Engine,
} from './common';
import { DESCRIPTOR_VECTORS, seedElasticsearch, seedEmbedded } from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 10_000);
/** Track events per second in a loaded round. */
const RATE = Number(process.env.BENCH_RATE ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6); // per mode
const ROUND_S = Number(process.env.BENCH_ROUND_SECONDS ?? 25);
const WARMUP_S = 10;
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
const GOAL = 1.2;
/**
 * `BENCH_ROLLUP=off`: the api role alone, so events are logged but never rolled up — what the
 * track requests cost by themselves. Such a run is written to the temp directory.
 */
const ROLLUP = process.env.BENCH_ROLLUP !== 'off';
/** `BENCH_PASS_MS`: another roll-up interval for this run (an experiment, written to the temp directory). */
const PASS_MS = process.env.BENCH_PASS_MS ? Number(process.env.BENCH_PASS_MS) : undefined;
const OFFICIAL = ROLLUP && PASS_MS === undefined;
if (PASS_MS !== undefined) (LIMITS as { popularityPassMs: number }).popularityPassMs = PASS_MS;

/** The listing query of search-latency.ts, sorted by price or by popularity in turns. */
function query(i: number): string {
  const lo = 20 + (i % 10) * 5;
  return new URLSearchParams({
    q: `category:boots|sneakers|loafers,price:${lo}:${lo + 250},instock:true,color:!pink`,
    sort: i % 2 ? 'price' : 'service_popularity',
    order: i % 4 < 2 ? 'desc' : 'asc',
    page: String(1 + (i % 5)),
    limit: '24',
    fields: 'price,service_popularity,service_purchases',
  }).toString();
}

/**
 * Sends RATE events per second, one per request, on a schedule (open loop: a slow answer does
 * not slow the sender) until stopped. Item ids are skewed, as shoppers' clicks are.
 */
function startTracker(url: string, dsToken: string, seed: number) {
  // on Elasticsearch a track answers once its bulk is written (the log lingers 500 ms to share
  // one), so about 60 requests are in flight at 100 per second
  const pool = new Pool(url, { connections: 256 });
  const r = rng(seed);
  const latencies: number[] = [];
  let sent = 0;
  let accepted = 0;
  let failed = 0;
  const ids = new Set<string>();
  const start = Date.now();
  const inFlight = new Set<Promise<void>>();
  const send = (): void => {
    const id = `sku-${String(Math.floor(r() ** 3 * ITEMS)).padStart(7, '0')}`;
    ids.add(id);
    const v =
      r() < 0.2
        ? `a:purchase,id:${id},qty:${1 + Math.floor(r() * 3)}`
        : `a:click,id:${id},page_view_id:pv${sent}`;
    sent++;
    const t = process.hrtime.bigint();
    const p = pool
      .request({
        method: 'POST',
        path: `/orgs/bench/datasets/shoes/track?v=${encodeURIComponent(v)}`,
        headers: { accept: V2, authorization: `token ${dsToken}` },
      })
      .then(async (res) => {
        await res.body.dump();
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (res.statusCode === 202) accepted++;
        else failed++;
      })
      .catch(() => {
        failed++;
      })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  const timer = setInterval(() => {
    const due = Math.floor(((Date.now() - start) / 1000) * RATE);
    while (sent < due) send();
  }, 5);
  return {
    ids,
    async stop() {
      clearInterval(timer);
      await Promise.all([...inFlight]);
      await pool.close();
      const seconds = (Date.now() - start) / 1000;
      return {
        sent,
        accepted,
        failed,
        events_per_s: Math.round((accepted / seconds) * 10) / 10,
        track_ms: summarize(latencies),
      };
    },
  };
}

type Mode = 'quiet' | 'load';
/** quiet, load, load, quiet, quiet, load, … */
const modeOf = (round: number): Mode => (((round + 1) >> 1) % 2 === 0 ? 'quiet' : 'load');

async function benchEngine(engine: Engine): Promise<Record<string, unknown>> {
  const prefix = `benchpop${Date.now().toString(36)}-`;
  const app = await startService({
    APP_ROLES: ROLLUP ? 'api,worker' : 'api',
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
    if (writer)
      await seedElasticsearch(
        new EsIndices(writer, prefix, { shards: 1, replicas: 0 }),
        datasetId,
        ITEMS,
        DESCRIPTOR_VECTORS,
      );
    else
      seedEmbedded(app.container.config.dataDir, datasetId, catalogue(ITEMS), DESCRIPTOR_VECTORS);
    process.stderr.write(`[${engine}] loaded ${ITEMS} items in ${(Date.now() - t0) / 1000} s\n`);
    await new Promise((r) => setTimeout(r, 500));

    let i = 0;
    const searchFor = async (seconds: number, into?: number[]): Promise<number> => {
      const end = Date.now() + seconds * 1000;
      let n = 0;
      while (Date.now() < end) {
        const t = process.hrtime.bigint();
        const r = await client.get<{ results: unknown[] }>(
          `/orgs/bench/datasets/shoes/search?${query(i++)}`,
          dsToken,
        );
        const took = Number(process.hrtime.bigint() - t) / 1e6;
        if (r.status !== 200 || !r.body.results.length)
          throw new Error(`search: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
        into?.push(took);
        n++;
      }
      return n;
    };
    // warm-up: searches alone, then with events (the first roll-up passes, the track route)
    await searchFor(WARMUP_S);
    const warm = startTracker(app.url!, dsToken, 1);
    await searchFor(WARMUP_S);
    await warm.stop();

    const times: Record<Mode, number[]> = { quiet: [], load: [] };
    const rounds: Array<Record<string, unknown>> = [];
    const tracked = new Set<string>();
    for (let round = 0; round < 2 * ROUNDS; round++) {
      const mode = modeOf(round);
      const tracker = mode === 'load' ? startTracker(app.url!, dsToken, round + 2) : undefined;
      const ms: number[] = [];
      await searchFor(ROUND_S, ms);
      const track = await tracker?.stop();
      tracker?.ids.forEach((id) => tracked.add(id));
      times[mode].push(...ms);
      rounds.push({ round, mode, search_ms: summarize(ms), ...(track ? { track } : {}) });
      process.stderr.write(`[${engine}] ${JSON.stringify(rounds[rounds.length - 1])}\n`);
    }
    // the counts really were maintained: every tracked item shows a count within a pass or two
    const settle = Date.now();
    let counted = 0;
    while (Date.now() - settle < 60_000) {
      const r = await client.get<{ total_results: number }>(
        `/orgs/bench/datasets/shoes/search?${new URLSearchParams({ q: 'service_popularity:1:', limit: '2' })}`,
        dsToken,
      );
      counted = r.body.total_results;
      const withPurchases = await client.get<{ total_results: number }>(
        `/orgs/bench/datasets/shoes/search?${new URLSearchParams({ q: 'service_purchases:1:', limit: '2' })}`,
        dsToken,
      );
      if (counted + withPurchases.body.total_results >= tracked.size) break;
      await new Promise((r) => setTimeout(r, 2000));
    }
    const quiet = summarize(times.quiet);
    const load = summarize(times.load);
    const pairs: number[] = [];
    for (let k = 0; k + 1 < rounds.length; k += 2) {
      const [a, b] = [rounds[k]!, rounds[k + 1]!];
      const q = (a.mode === 'quiet' ? a : b).search_ms as { p95: number };
      const l = (a.mode === 'load' ? a : b).search_ms as { p95: number };
      pairs.push(Math.round((l.p95 / q.p95) * 100) / 100);
    }
    return {
      engine,
      date: new Date().toISOString(),
      items: ITEMS,
      quiet_ms: quiet,
      load_ms: load,
      ratio_p95: Math.round((load.p95 / quiet.p95) * 100) / 100,
      ratio_p50: Math.round((load.p50 / quiet.p50) * 100) / 100,
      pair_ratios_p95: pairs,
      pair_ratio_p95_median: median(pairs),
      met: load.p95 / quiet.p95 <= GOAL,
      tracked_items: tracked.size,
      items_with_clicks_after: counted,
      rounds,
    };
  } finally {
    await client.close();
    await writer?.close();
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function main(): Promise<void> {
  const runs: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES) runs.push(await benchEngine(engine));
  const previous = path.join(RESULTS_DIR, 'popularity-load.json');
  if (OFFICIAL && fs.existsSync(previous))
    for (const old of (JSON.parse(fs.readFileSync(previous, 'utf8')) as { runs: typeof runs }).runs)
      if (!runs.some((r) => r.engine === old.engine && r.items === old.items)) runs.push(old);
  const result = {
    benchmark: 'popularity-load',
    date: new Date().toISOString(),
    commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(),
    machine: machine(),
    parameters: {
      items: ITEMS,
      events_per_second: RATE,
      events:
        'one per request, open loop (up to 256 connections); 80 % a:click, 20 % a:purchase with qty 1–3; ids skewed (u³)',
      rounds_per_mode: ROUNDS,
      round_seconds: ROUND_S,
      warmup_seconds: 2 * WARMUP_S,
      roll_up_interval_ms: LIMITS.popularityPassMs,
      question: `GET search?${query(0)} (price window, page, order vary; sort alternates service_popularity / price)`,
      goal: `load p95 ≤ ${GOAL} × quiet p95`,
    },
    note: 'one sequential search client on the same 2-core machine as the service, the tracker and Elasticsearch; quiet and load rounds counterbalanced',
    runs,
  };
  const file = OFFICIAL
    ? writeResult('popularity-load', result)
    : path.join(os.tmpdir(), `popularity-load-${ROLLUP ? `pass-${PASS_MS}` : 'no-rollup'}.json`);
  if (!OFFICIAL) fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
