/**
 * Tuned similarity's cost at query time (contract §20), on both engines: two datasets of the
 * same items (real vectors of the default hybrid embedder, each item's metadata `label` the class
 * of its image: food group, digit or shape-colour), `plain` without the setting and `tuned` with
 * it at weight 0.75. For `tuned` it times the PUT until the fit lands (on Elasticsearch also the
 * rewrite of every item with its projection, seen as the count of rewritten documents grows),
 * then times GET similar?id=…&limit=11 with the same random ids on both, in interleaved rounds
 * of sequential requests, and checks that the tuned answers differ from the plain ones.
 *
 * The fit runs in a service with a worker (TUNING_PASS_MS=500); the requests are timed in an
 * API-only service started afterwards on the same data, as bench/search-latency.ts times them,
 * so the worker's background passes do not run under the measurement. (That second start leaves
 * the empty data directory startService made for it in the temp directory.) On Elasticsearch the
 * service merges the tuned index after its rewrite, before the fit lands (timed as merge_s, from
 * the first force-merge task seen); the seeded plain one is merged to one segment too, or with
 * BENCH_SEED_MERGED=0 left as bulk loading left it, as an untuned catalogue's index is, and then
 * merged for two more rounds (BENCH_MERGE_TUNED=0 skips them). The figures of each seeding are
 * kept beside the other's.
 *
 *   npm run bench:tuning-latency   (BENCH_ITEMS, BENCH_REQUESTS, BENCH_ENGINES to change)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { RunningApp } from 'visual-search-service/dist/app/start';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  call,
  createDataset,
  deleteInstallation,
  gatewayClient,
  machine,
  rng,
  startService,
  summarize,
  timed,
  writeResult,
  type Engine,
} from './common';
import { loadRealVectors } from './real-vectors';
import {
  HYBRID_VECTORS,
  seedElasticsearch,
  seedEmbedded,
  withRealVectors,
  type BenchVectors,
} from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300);
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
const ROUNDS = 3;
const WARMUP = 40;
const WEIGHT = 0.75;
/** The metadata field the fit learns from. */
const FIELD = 'label';
const FIT_TIMEOUT_MS = 3_600_000;
/** On Elasticsearch with an unmerged seed, merge both indices and measure two rounds more. */
const MERGE_TUNED = process.env.BENCH_MERGE_TUNED !== '0';
/**
 * On Elasticsearch, seed both indices merged to one segment (the default), or leave them as bulk
 * loading left them, so that the first rounds compare two unmerged indices (then both are merged).
 */
const SEED_MERGED = process.env.BENCH_SEED_MERGED !== '0';
const NAMES = ['plain', 'tuned'] as const;
type Name = (typeof NAMES)[number];

const r2 = (x: number): number => Math.round(x * 100) / 100;
const load = (): number[] => os.loadavg().map(r2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sku = (i: number): string => `sku-${String(i).padStart(7, '0')}`;

/** The catalogue's items, item i carrying row i's class as `label` (or its category without). */
function* labelled(labels: string[] | undefined): Generator<StoredItem> {
  let i = 0;
  for (const it of catalogue(ITEMS)) {
    const label = labels ? labels[i]! : String(it.metadata.category);
    yield { ...it, metadata: { ...it.metadata, [FIELD]: label } };
    i++;
  }
}

/**
 * PUT the setting on `tuned` and poll until it leaves `fitting`. On Elasticsearch the index's
 * count of documents holding a projection (blend_model) tells when the rewrite began: the fit
 * writes nothing before its projection is made and checked.
 */
async function fit(app: RunningApp, orgToken: string, index?: string) {
  const base = app.url!;
  const ds = '/orgs/bench/datasets/tuned';
  const rewritten = async (): Promise<number> => {
    const r = await fetch(`${ES_URL}/${index}/_count`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: { exists: { field: 'blend_model' } } }),
    });
    return ((await r.json()) as { count: number }).count;
  };
  const merging = async (): Promise<boolean> => {
    const r = await fetch(`${ES_URL}/_tasks?actions=indices:admin/forcemerge*&detailed=true`);
    return JSON.stringify(await r.json()).includes(index!);
  };
  const t0 = performance.now();
  const put = await call(base, 'PUT', `${ds}/settings/similarity`, orgToken, {
    learn_from: FIELD,
    weight: WEIGHT,
  });
  if (put.status !== 200) throw new Error(`setSimilarity: ${JSON.stringify(put.body)}`);
  let firstRewrittenS: number | undefined;
  let mergeSeenS: number | undefined;
  for (;;) {
    await sleep(250);
    const s = (await call(base, 'GET', ds, orgToken)).body.dataset.settings.similarity;
    const at = (performance.now() - t0) / 1000;
    if (index && firstRewrittenS === undefined && (await rewritten()) > 0) firstRewrittenS = at;
    if (index && mergeSeenS === undefined && (await merging())) mergeSeenS = at;
    if (s.state !== 'fitting') {
      const out: Record<string, unknown> = { put_to_state_s: r2(at), setting: s };
      if (index) {
        // the count is refreshed each second: the split is good to about a second
        out.fit_before_rewrite_s = firstRewrittenS === undefined ? null : r2(firstRewrittenS);
        const rewriteEnd = mergeSeenS ?? at;
        out.rewrite_s = firstRewrittenS === undefined ? null : r2(rewriteEnd - firstRewrittenS);
        out.merge_s = mergeSeenS === undefined ? null : r2(at - mergeSeenS);
        // the service lands after waiting a bounded time: the rounds begin once the merge ended
        while (await merging()) await sleep(1000);
        out.merge_went_on_after_active_s = r2((performance.now() - t0) / 1000 - at);
        await fetch(`${ES_URL}/${index}/_refresh`, { method: 'POST' });
        out.documents_with_projection = await rewritten();
      }
      return out;
    }
    if (at * 1000 > FIT_TIMEOUT_MS) throw new Error(`still fitting after ${at} s`);
  }
}

/**
 * Segments and deleted documents of an index (a rewrite of every item leaves both behind); docs
 * and deleted_docs count Lucene documents, each item's nested metadata fields among them.
 */
async function indexShape(index: string): Promise<Record<string, number>> {
  const r = await fetch(`${ES_URL}/${index}/_stats/docs,segments`);
  const p = ((await r.json()) as any)._all.primaries;
  return { docs: p.docs.count, deleted_docs: p.docs.deleted, segments: p.segments.count };
}

type Ask = (n: Name, id: string) => Promise<Array<{ id: string; score: number }>>;

/**
 * `count` rounds of REQUESTS sequential requests per dataset, the same random ids on both and
 * the order alternating; every answer's scores checked (in [0, 1], never rising down the list)
 * and its top 10 compared with the other dataset's.
 */
async function measure(
  ask: Ask,
  labels: string[] | undefined,
  count: number,
  seed: number,
  tag: string,
) {
  const check = { queries: 0, differ: 0, overlap: 0, badScores: 0, p10: { plain: 0, tuned: 0 } };
  const rounds: Array<Record<string, unknown>> = [];
  const all: Record<Name, number[]> = { plain: [], tuned: [] };
  const rand = rng(seed);
  for (let round = 0; round < count; round++) {
    const queries = Array.from({ length: REQUESTS }, () => Math.floor(rand() * ITEMS));
    const order: Name[] = round % 2 ? ['tuned', 'plain'] : ['plain', 'tuned'];
    const top: Record<Name, string[][]> = { plain: [], tuned: [] };
    const loadStart = load();
    const ms = {} as Record<Name, number[]>;
    for (const n of order)
      ms[n] = await timed(
        async (i) => {
          const res = await ask(n, sku(queries[i]!));
          res.forEach((h, k) => {
            if (!(h.score >= 0 && h.score <= 1) || (k > 0 && h.score > res[k - 1]!.score + 1e-9))
              check.badScores++;
          });
          top[n][i] = res.slice(1).map((h) => h.id);
        },
        REQUESTS,
        0,
      );
    const loadEnd = load();
    queries.forEach((q, i) => {
      const [p, t] = [top.plain[i]!, top.tuned[i]!];
      check.queries++;
      check.overlap += p.filter((id) => t.includes(id)).length / 10;
      if (p.join() !== t.join()) check.differ++;
      if (labels)
        for (const n of NAMES)
          check.p10[n] +=
            top[n][i]!.filter((id) => labels[Number(id.slice(4))] === labels[q]).length / 10;
    });
    const s = { plain: summarize(ms.plain), tuned: summarize(ms.tuned) };
    all.plain.push(...ms.plain);
    all.tuned.push(...ms.tuned);
    const row = {
      round,
      order,
      loadavg_start: loadStart,
      loadavg_end: loadEnd,
      plain_ms: s.plain,
      tuned_ms: s.tuned,
      ratio_p50: r2(s.tuned.p50 / s.plain.p50),
      ratio_p95: r2(s.tuned.p95 / s.plain.p95),
    };
    process.stderr.write(`[${tag}] ${JSON.stringify(row)}\n`);
    rounds.push(row);
  }
  const overall = { plain: summarize(all.plain), tuned: summarize(all.tuned) };
  return {
    rounds,
    overall: {
      plain_ms: overall.plain,
      tuned_ms: overall.tuned,
      ratio_p50: r2(overall.tuned.p50 / overall.plain.p50),
      ratio_p95: r2(overall.tuned.p95 / overall.plain.p95),
    },
    within_1_2: overall.tuned.p95 <= 1.2 * overall.plain.p95,
    answers: {
      queries: check.queries,
      top10_differs_share: r2(check.differ / check.queries),
      top10_mean_overlap: r2(check.overlap / check.queries),
      scores_outside_0_1_or_rising: check.badScores,
      ...(labels
        ? {
            label_precision_at_10: {
              plain: r2(check.p10.plain / check.queries),
              tuned: r2(check.p10.tuned / check.queries),
            },
          }
        : {}),
    },
  };
}

/** One segment, as the seed merges the plain index (a task, polled: it takes minutes). */
async function forceMerge(es: ReturnType<typeof esClient>, index: string): Promise<void> {
  const { task } = await es.indices.forcemerge({
    index,
    max_num_segments: 1,
    wait_for_completion: false,
  });
  while (!(await es.tasks.get({ task_id: String(task) })).completed) await sleep(5000);
}

async function benchEngine(
  engine: Engine,
  vectors: BenchVectors,
  labels: string[] | undefined,
): Promise<Record<string, unknown>> {
  const es = engine === 'elasticsearch';
  const prefix = `benchtl${Date.now().toString(36)}-`;
  const env: Record<string, string> = {
    EMBEDDER: vectors.kind,
    RATE_LIMIT_PER_MINUTE: '1000000',
    ...(es
      ? {
          SEARCH_BACKEND: 'elasticsearch',
          ELASTICSEARCH_URL: ES_URL,
          ES_INDEX_PREFIX: prefix,
          // both services of the run share the queues, so one clean-up removes them
          AMQP_QUEUE_PREFIX: `bench.${prefix}`,
        }
      : {}),
  };
  // the fit's service: no duplicate report, whose pass would scan the same items meanwhile
  let app = await startService({
    ...env,
    APP_ROLES: 'api,worker',
    TUNING_PASS_MS: '500',
    DUPLICATE_REPORT: 'off',
  });
  const writer = es ? esClient(ES_URL) : undefined;
  let client: ReturnType<typeof gatewayClient> | undefined;
  try {
    const plain = await createDataset(app, 'plain');
    const made = await call(app.url!, 'POST', '/orgs/bench/datasets', plain.orgToken, {
      name: 'tuned',
    });
    if (made.status !== 201) throw new Error(`dataset: ${JSON.stringify(made.body)}`);
    const tunedId = (await app.container.ports.accounts.getDataset('bench', 'tuned'))!.id;
    const token: Record<Name, string> = {
      plain: plain.dsToken,
      tuned: made.body.dataset.browse_token as string,
    };
    const ids: Record<Name, string> = { plain: plain.datasetId, tuned: tunedId };
    const indexOf = (n: Name) => `${prefix}items-${ids[n]}`;
    const seedS: Record<string, number> = {};
    for (const n of NAMES) {
      const t = Date.now();
      if (es)
        await seedElasticsearch(
          new EsIndices(writer!, prefix, { shards: 1, replicas: 0 }),
          ids[n],
          ITEMS,
          vectors,
          labelled(labels),
          SEED_MERGED,
        );
      else seedEmbedded(app.container.config.dataDir, ids[n], labelled(labels), vectors);
      seedS[n] = (Date.now() - t) / 1000;
      process.stderr.write(`[${engine}] seeded ${n}: ${ITEMS} items in ${seedS[n]} s\n`);
    }
    // seeding blocked the event loop: let overdue keep-alive timers close idle sockets first
    await sleep(500);
    const tuning = await fit(app, plain.orgToken, es ? indexOf('tuned') : undefined);
    process.stderr.write(`[${engine}] ${JSON.stringify(tuning)}\n`);
    const indexAfterFit = es
      ? { plain: await indexShape(indexOf('plain')), tuned: await indexShape(indexOf('tuned')) }
      : undefined;

    // the requests are timed in an API-only service on the same data (see the header)
    const dataDir = app.container.config.dataDir;
    await app.stop();
    app = await startService({ ...env, APP_ROLES: 'api', DATA_DIR: dataDir });
    client = gatewayClient(app.url!);
    const ask = async (n: Name, id: string) => {
      const r = await client!.get<{ results: Array<{ id: string; score: number }> }>(
        `/orgs/bench/datasets/${n}/similar?id=${id}&limit=11`,
        token[n],
      );
      if (r.status !== 200 || r.body.results.length !== 11)
        throw new Error(`similar on ${n}: ${JSON.stringify(r.body).slice(0, 300)}`);
      return r.body.results;
    };
    // the first request of each loads the dataset's vectors (embedded: with their projections)
    const cold: Record<string, number> = {};
    for (const n of NAMES)
      cold[n] = (await timed(async () => void (await ask(n, sku(0))), 1, 0))[0]!;
    for (let i = 0; i < WARMUP; i++) for (const n of NAMES) await ask(n, sku((i * 7919) % ITEMS));

    const measured = await measure(ask, labels, ROUNDS, 2027, engine);
    const active = (tuning.setting as { state: string }).state === 'active';
    const out: Record<string, unknown> = {
      engine,
      date: new Date().toISOString(),
      seed_s: seedS,
      tuning,
      cold_first_request_ms: Object.fromEntries(NAMES.map((n) => [n, r2(cold[n]!)])),
      ...measured,
      goal_p95_within_1_2: active && measured.within_1_2,
      ...(es ? { seed_merged: SEED_MERGED, service_merges_after_rewrite: true } : {}),
    };
    if (es) {
      out.index_after_fit = indexAfterFit;
      // The service merged the tuned index after its rewrite (fit() waited for that merge to
      // end): with the plain one merged too, the two differ by the tuned query alone.
      if (MERGE_TUNED && !SEED_MERGED) {
        const t = Date.now();
        await forceMerge(writer!, indexOf('plain'));
        out.after_merging_both = {
          merge_s: (Date.now() - t) / 1000,
          plain_index: await indexShape(indexOf('plain')),
          index: await indexShape(indexOf('tuned')),
          ...(await measure(ask, labels, 2, 2028, `${engine}, both merged`)),
        };
      }
    }
    return out;
  } finally {
    await client?.close();
    await writer?.close();
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function main(): Promise<void> {
  const started = new Date().toISOString();
  const vectors = await withRealVectors(HYBRID_VECTORS, ITEMS);
  const labels = vectors.real ? (await loadRealVectors(ITEMS)).labels : undefined;
  if (!labels)
    process.stderr.write(
      `fewer than ${ITEMS} real vectors cached: random unit vectors, labelled by category (nothing to learn)\n`,
    );
  const engines: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES) engines.push(await benchEngine(engine, vectors, labels));
  // measuring one engine keeps the other's last figures at the same size (each has its date)
  const previous = path.join(RESULTS_DIR, 'tuning-latency.json');
  if (fs.existsSync(previous)) {
    const old = JSON.parse(fs.readFileSync(previous, 'utf8')) as {
      items: number;
      engines: typeof engines;
    };
    // an unmerged-seed run is kept beside the merged one
    const variant = (e: Record<string, unknown>) => `${e.engine}/${e.seed_merged !== false}`;
    const ran = new Set(engines.map(variant));
    if (old.items === ITEMS) for (const e of old.engines) if (!ran.has(variant(e))) engines.push(e);
  }
  const file = writeResult('tuning-latency', {
    benchmark: 'tuning-latency',
    date: started,
    machine: machine(),
    items: ITEMS,
    vectors: labels
      ? `real (bench/real-vectors.ts), hybrid ${vectors.dimensions}-d; ${new Set(labels).size} labels in '${FIELD}'`
      : `random unit vectors, ${vectors.dimensions}-d; '${FIELD}' is the category (nothing to learn)`,
    weight: WEIGHT,
    requests_per_dataset_per_round: REQUESTS,
    rounds: ROUNDS,
    warmup: WARMUP,
    goals:
      'similarity p95 with tuning on within 1.2× of tuning off at 100,000 items, both engines; ' +
      'the Elasticsearch rewrite of a fit at 100,000 items timed',
    note:
      'GET similar?id=…&limit=11, sequential, one kept-alive client on the same machine; the ' +
      'same random ids on both datasets; rounds alternate which dataset goes first. ' +
      'put_to_state_s: PUT settings/similarity until the state leaves fitting (polled every ' +
      '250 ms); rewrite_s: from the first document with a projection to the service asking ' +
      'Elasticsearch to merge the index (merge_s: from then to active).',
    engines,
  });
  process.stdout.write(`${JSON.stringify(engines, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
