/**
 * The near-duplicate report's two performance goals (contract §18, docs/engines.md):
 *
 * - `pass`: a full duplicate pass over BENCH_ITEMS (100,000) processed items in at most
 *   10 minutes on two cores, per engine. The items are seeded as bench/seed-items.ts seeds the
 *   search bench (the catalogue, 1,420-d vectors of the default embedder; the real images'
 *   vectors of bench/real-vectors.ts as far as they are cached, in a shuffled order so that any
 *   run of ids is a random sample; random unit vectors for the rest, counted in the file). A
 *   DuplicatePass is built straight on the engine's ports and its `pass()` (in slices, as a
 *   worker runs it) timed over the first pass (every item): wall time, this process's CPU,
 *   Elasticsearch's CPU, items/s, entries and pairs stored. Before it, two neighbour searches
 *   of 50 items are timed apart (the first builds the embedded engine's in-memory index).
 *   BENCH_PASS_ITEMS_LIMIT=n searches only the first n items (each against all BENCH_ITEMS)
 *   and extrapolates the full pass from their rate, labelled so. Then recall of the stored
 *   pairs against brute force (exact cosine over every seeded vector) for BENCH_RECALL_SAMPLE
 *   (200) searched items, per source of vectors.
 * - `ingest`: images processed per second with the report off (A, DUPLICATE_REPORT=off) and on
 *   (B, DUPLICATE_PASS_MS as configured), rounds interleaved A, B, B, A, A, B, …, each a fresh
 *   installation in this process (api and worker roles) as bench/webhooks-ingest.ts runs them.
 *   Item n is food photo n mod 542, cropped and re-encoded a little more for each later round
 *   of the photos, so the dataset holds near duplicates. After a B round the bench waits until
 *   the report answers pending: false with a computed_at and records how long after the last
 *   item was processed that was (goal 60 s). Goal: median of B ÷ A ≥ 0.95.
 *
 * Two cores: on a machine with more, the bench runs itself again under `taskset -c 0,1`
 * (Elasticsearch and RabbitMQ are not pinned by it; the file records the machine's cores).
 *
 *   npm run bench:duplicates-pass   (BENCH_MEASURE=pass|ingest (both), BENCH_SETUPS=embedded|
 *     elasticsearch (both), BENCH_ITEMS (100000), BENCH_PASS_ITEMS_LIMIT (0: all),
 *     BENCH_RECALL_SAMPLE (200), BENCH_RUN_LABEL (a pass run kept apart), BENCH_INGEST_ITEMS
 *     (3000), BENCH_DUPLICATE_ROUNDS (3 per mode), BENCH_BATCH (500), WORKER_CONCURRENCY (8),
 *     BENCH_SETTLE_TIMEOUT_S (300))
 */
import { Client } from '@elastic/elasticsearch';
import { execFileSync, fork, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import sharp from 'sharp';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { esPorts } from 'visual-search-service/dist/adapters/elasticsearch/es-ports';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import { openDb } from 'visual-search-service/dist/adapters/embedded/db';
import { embeddedPorts } from 'visual-search-service/dist/adapters/embedded/embedded-ports';
import type { EnginePorts } from 'visual-search-service/dist/adapters/engine-ports';
import {
  MAX_DISTANCE,
  NEIGHBOURS_KEPT,
  defaultMaxDistance,
} from 'visual-search-service/dist/domain/duplicates';
import { DuplicatePass } from 'visual-search-service/dist/jobs/duplicate-pass';
import type { NeighbourEntry } from 'visual-search-service/dist/ports/duplicate-store';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  SETUPS,
  call,
  cpuSeconds,
  createDataset,
  deleteInstallation,
  machine,
  median,
  pidOnPort,
  rng,
  startService,
  startRound,
  roundTag,
  unitVector,
  writeResult,
  type Engine,
  type Setup,
} from './common';
import { foodImages } from './food-images';
import { loadRealVectors } from './real-vectors';
import { HYBRID_VECTORS, seedElasticsearch, seedEmbedded, type BenchVectors } from './seed-items';

const MEASURES = (process.env.BENCH_MEASURE ?? 'pass,ingest').split(',');
const ONLY = process.env.BENCH_SETUPS;

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
const PASS_LIMIT = Number(process.env.BENCH_PASS_ITEMS_LIMIT ?? 0);
const RECALL_SAMPLE = Number(process.env.BENCH_RECALL_SAMPLE ?? 200);
/** Names a pass run apart from the engine's last one at that size (kept beside it in the file). */
const LABEL = process.env.BENCH_RUN_LABEL;
const PASS_GOAL_S = 600;
/** Items of the warm-up neighbour search: one of the pass's batches. */
const WARMUP_ITEMS = 50;

const INGEST_ITEMS = Number(process.env.BENCH_INGEST_ITEMS ?? 3000);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const CONCURRENCY = process.env.WORKER_CONCURRENCY ?? '8';
const ROUNDS = Number(process.env.BENCH_DUPLICATE_ROUNDS ?? 3);
const INGEST_GOAL = 0.95;
const SETTLE_GOAL_S = 60;
const SETTLE_TIMEOUT_S = Number(process.env.BENCH_SETTLE_TIMEOUT_S ?? 300);

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** The commit measured, and the files of src/ that differ from it (work in progress). */
function revision(): { commit: string; src_changed: string[] } {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: path.join(__dirname, '../..'), encoding: 'utf8' }).trim();
  try {
    return {
      commit: git('rev-parse', '--short', 'HEAD'),
      src_changed: git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean),
    };
  } catch {
    return { commit: 'unknown', src_changed: [] };
  }
}

/** When the service's build (dist/) that this run loaded was made, by its neighbour search. */
function serviceBuild(): Record<string, unknown> {
  const file = require.resolve('visual-search-service/dist/adapters/embedded/near-pairs');
  return {
    embedded_near_pairs_js: fs.statSync(file).mtime.toISOString(),
    embedded_near_index: fs.existsSync(path.join(path.dirname(file), 'near-index.js')),
  };
}

/** Read at start: a rebuild during a run does not change what the run loaded. */
const BUILD = serviceBuild();

/** The cores this process may run on (taskset's list), as the kernel reports it. */
function cpusAllowed(): string {
  const m = /Cpus_allowed_list:\s*(\S+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m?.[1] ?? 'unknown';
}

/** Elasticsearch's CPU seconds so far: its process's, or the node stats' when not local. */
async function esCpuSeconds(): Promise<number> {
  const pid = pidOnPort(Number(new URL(ES_URL).port || 9200));
  if (pid) return cpuSeconds(pid);
  const r = await fetch(`${ES_URL}/_nodes/_local/stats/process`);
  const body = (await r.json()) as {
    nodes: Record<string, { process: { cpu: { total_in_millis: number } } }>;
  };
  return Object.values(body.nodes)[0]!.process.cpu.total_in_millis / 1000;
}

function shuffled(n: number, seed: number): number[] {
  const r = rng(seed);
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

/**
 * The default embedder's vectors for `items` catalogue items: real images' vectors (a sample of
 * the cached ones without repeats) at shuffled positions, random unit vectors for any items
 * beyond the cache.
 */
async function passVectors(
  items: number,
): Promise<{ vectors: BenchVectors; real: number; kinds: string[] }> {
  const dims = HYBRID_VECTORS.dimensions;
  const file = path.join(__dirname, '../../.cache/bench', `real-vectors-${HYBRID_VECTORS.id}.f32`);
  const cached = fs.existsSync(file) ? Math.floor(fs.statSync(file).size / (4 * dims)) : 0;
  const data = new Float32Array(items * dims);
  const at = shuffled(items, 17);
  const real = Math.min(items, cached);
  const kinds = new Array<string>(items).fill('random');
  if (real > 0) {
    const source = await loadRealVectors(cached);
    const rows = shuffled(cached, 29);
    for (let j = 0; j < real; j++) {
      const [i, row] = [at[j]!, rows[j]!];
      data.set(source.data.subarray(row * dims, (row + 1) * dims), i * dims);
      const label = source.labels[row] ?? '';
      kinds[i] = label.startsWith('group-')
        ? 'food photo'
        : label.startsWith('digit-')
          ? 'digit'
          : 'drawing';
    }
  }
  for (let j = real; j < items; j++) data.set(unitVector(dims, at[j]! + 1), at[j]! * dims);
  return { vectors: { ...HYBRID_VECTORS, real: data }, real, kinds };
}

const indexOf = (id: string) => Number(id.slice(4));

/**
 * Recall of the stored pairs against brute force for `sample` items that the pass searched:
 * exact cosine distance to every seeded vector. Two truths: every pair within MAX_DISTANCE
 * (found when either side's entry holds it, as the report reads them), and the item's own
 * NEIGHBOURS_KEPT closest within MAX_DISTANCE (what its own search should return).
 */
function recall(
  data: Float32Array,
  items: number,
  dims: number,
  sample: number[],
  entries: NeighbourEntry[],
  fullPass: boolean,
  defaultMax: number,
  kinds: string[],
): Record<string, unknown> {
  const byKind = new Map<
    string,
    { items: number; max: number; dflt: number; t: number; f: number; td: number; fd: number }
  >();
  const norms = new Float32Array(items);
  for (let i = 0; i < items; i++) {
    let s = 0;
    for (let k = i * dims; k < (i + 1) * dims; k++) s += data[k]! * data[k]!;
    norms[i] = Math.sqrt(s);
  }
  const own = new Map(entries.map((e) => [indexOf(e.id), e.neighbours]));
  const pointing = new Map<number, Set<number>>();
  for (const e of entries)
    for (const n of e.neighbours) {
      const j = indexOf(n.id);
      if (!pointing.has(j)) pointing.set(j, new Set());
      pointing.get(j)!.add(indexOf(e.id));
    }
  let truthAll = 0;
  let foundAll = 0;
  let truthDefault = 0;
  let foundDefault = 0;
  let truthCapped = 0;
  let foundCapped = 0;
  let truthCappedDefault = 0;
  let foundCappedDefault = 0;
  let overCap = 0;
  let withAny = 0;
  let falsePairs = 0;
  let maxDistanceError = 0;
  const missed: number[] = [];
  let missedToCap = 0;
  const distance = (s: number, j: number): number => {
    let dot = 0;
    const [a, b] = [s * dims, j * dims];
    for (let k = 0; k < dims; k++) dot += data[a + k]! * data[b + k]!;
    return 1 - dot / (norms[s]! * norms[j]!);
  };
  for (const s of sample) {
    const near: Array<{ j: number; d: number }> = [];
    for (let j = 0; j < items; j++) {
      if (j === s) continue;
      const d = distance(s, j);
      if (d <= MAX_DISTANCE) near.push({ j, d });
    }
    near.sort((a, b) => a.d - b.d || a.j - b.j);
    const mine = own.get(s) ?? [];
    const mineSet = new Set(mine.map((n) => indexOf(n.id)));
    const either = new Set([...mineSet, ...(pointing.get(s) ?? [])]);
    const exact = new Map(near.map((n) => [n.j, n.d]));
    for (const n of mine) {
      const j = indexOf(n.id);
      const d = exact.get(j) ?? distance(s, j);
      if (d > MAX_DISTANCE + 1e-4) falsePairs++;
      maxDistanceError = Math.max(maxDistanceError, Math.abs(d - n.distance));
    }
    if (near.length) withAny++;
    if (near.length > NEIGHBOURS_KEPT) overCap++;
    truthAll += near.length;
    near.forEach((n, rank) => {
      if (either.has(n.j)) foundAll++;
      else {
        missed.push(n.d);
        // both sides kept NEIGHBOURS_KEPT closer ones: the cap dropped it, not the search
        const theirs = own.get(n.j) ?? [];
        if (
          rank >= NEIGHBOURS_KEPT &&
          theirs.length >= NEIGHBOURS_KEPT &&
          theirs.at(-1)!.distance <= n.d + 1e-6
        )
          missedToCap++;
      }
      if (n.d <= defaultMax) {
        truthDefault++;
        if (either.has(n.j)) foundDefault++;
      }
    });
    const capped = near.slice(0, NEIGHBOURS_KEPT);
    const hit = capped.filter((n) => mineSet.has(n.j)).length;
    const cappedDefault = capped.filter((n) => n.d <= defaultMax);
    const hitDefault = cappedDefault.filter((n) => mineSet.has(n.j)).length;
    truthCapped += capped.length;
    foundCapped += hit;
    truthCappedDefault += cappedDefault.length;
    foundCappedDefault += hitDefault;
    const k = byKind.get(kinds[s]!) ?? { items: 0, max: 0, dflt: 0, t: 0, f: 0, td: 0, fd: 0 };
    byKind.set(kinds[s]!, {
      items: k.items + 1,
      max: k.max + near.length,
      dflt: k.dflt + near.filter((n) => n.d <= defaultMax).length,
      t: k.t + capped.length,
      f: k.f + hit,
      td: k.td + cappedDefault.length,
      fd: k.fd + hitDefault,
    });
  }
  missed.sort((a, b) => a - b);
  const ratio = (a: number, b: number) => (b ? round(a / b, 4) : null);
  return {
    sample_items: sample.length,
    // per source of the sample item's vector (real-vectors.ts): true pairs per item and recall
    by_source: Object.fromEntries(
      [...byKind].map(([kind, k]) => [
        kind,
        {
          items: k.items,
          mean_true_pairs_within_max: round(k.max / k.items, 1),
          mean_true_pairs_within_default: round(k.dflt / k.items, 1),
          own_entry_recall: ratio(k.f, k.t),
          own_entry_recall_within_default: ratio(k.fd, k.td),
        },
      ]),
    ),
    sample_items_with_a_pair: withAny,
    sample_items_over_cap: overCap,
    true_pairs_within_max: truthAll,
    true_pairs_within_default: truthDefault,
    // the item's own entry against its exact NEIGHBOURS_KEPT closest within MAX_DISTANCE
    own_entry_recall: ratio(foundCapped, truthCapped),
    // the same, of those pairs within the embedder's default max_distance only
    own_entry_recall_within_default: ratio(foundCappedDefault, truthCappedDefault),
    // either side's entry (as the report reads them); only meaningful after a full pass
    pair_recall_within_max: fullPass ? ratio(foundAll, truthAll) : null,
    pair_recall_within_default: fullPass ? ratio(foundDefault, truthDefault) : null,
    missed_pairs: fullPass ? missed.length : null,
    missed_pairs_beyond_both_caps: fullPass ? missedToCap : null,
    missed_pair_distances: fullPass
      ? {
          min: missed.length ? round(missed[0]!, 4) : null,
          median: missed.length ? round(missed[missed.length >> 1]!, 4) : null,
          within_default: missed.filter((d) => d <= defaultMax).length,
          above_0_19: missed.filter((d) => d > 0.19).length,
        }
      : null,
    stored_pairs_beyond_max: falsePairs,
    max_stored_distance_error: round(maxDistanceError, 6),
  };
}

/** One full (or capped) duplicate pass on a freshly seeded dataset of one engine. */
async function passRun(
  engine: Engine,
  vectors: BenchVectors,
  realVectors: number,
  kinds: string[],
): Promise<Record<string, unknown>> {
  const tag = `benchdp${Date.now().toString(36)}`;
  const app = await startService({
    APP_ROLES: 'api',
    DUPLICATE_REPORT: 'off',
    EMBEDDER: 'hybrid',
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: `${tag}-` }
      : {}),
  });
  const config = app.container.config;
  let running = true;
  let close: (() => Promise<void>) | undefined;
  try {
    const { datasetId } = await createDataset(app, 'dups');
    const t0 = Date.now();
    let writer: Client | undefined;
    if (engine === 'elasticsearch') {
      writer = esClient(ES_URL);
      await seedElasticsearch(
        new EsIndices(writer, config.ES_INDEX_PREFIX, { shards: 1, replicas: 0 }),
        datasetId,
        ITEMS,
        vectors,
      );
      await writer.close();
    } else seedEmbedded(config.dataDir, datasetId, catalogue(ITEMS), vectors);
    const loadS = (Date.now() - t0) / 1000;
    process.stderr.write(`[${engine}] seeded ${ITEMS} items in ${loadS.toFixed(1)} s\n`);
    // the pass runs alone in this process: no server, no worker
    await app.stop();
    running = false;

    let ports: EnginePorts;
    if (engine === 'elasticsearch') {
      const client = esClient(ES_URL);
      const indices = new EsIndices(client, config.ES_INDEX_PREFIX, { shards: 1, replicas: 0 });
      ports = esPorts(indices, { vectorDims: vectors.dimensions });
      close = () => client.close();
    } else {
      const db = openDb(path.join(config.dataDir, 'store.db'));
      ports = embeddedPorts(db, config.dataDir);
      close = async () => void db.close();
    }
    const { content, engine: search, duplicates, accounts } = ports;

    let listed = 0;
    let searchMs = 0;
    const pass = new DuplicatePass({
      store: duplicates,
      reader: {
        async processedSince(ds, since, after, limit) {
          if (PASS_LIMIT && listed >= PASS_LIMIT) return [];
          const page = await content.processedSince(ds, since, after, limit);
          const kept = PASS_LIMIT ? page.slice(0, PASS_LIMIT - listed) : page;
          listed += kept.length;
          return kept;
        },
        getItems: (ds, ids) => content.getItems(ds, ids),
      },
      engine: {
        async neighbours(...args) {
          const t = performance.now();
          try {
            return await search.neighbours(...args);
          } finally {
            searchMs += performance.now() - t;
          }
        },
        compact: (ds, keepWaiting) => search.compact(ds, keepWaiting),
      },
      datasets: () => accounts.liveDatasets(),
      counts: (id) => content.counts(id),
      waitingForEmbedder: (id, embedderId) => content.staleEmbeddingCount(id, embedderId),
      now: Date.now,
      log: pino({ level: 'warn' }),
      owner: 'bench',
    });

    // two searches of 50 items each before the pass, timed apart: the first builds what the
    // engine keeps in memory (the embedded engine's index), the second is a warm one
    const ids = (
      await content.processedSince(datasetId, undefined, undefined, 2 * WARMUP_ITEMS)
    ).map((f) => f.id);
    const warmups: number[] = [];
    for (const part of [ids.slice(0, WARMUP_ITEMS), ids.slice(WARMUP_ITEMS)]) {
      const w0 = performance.now();
      await search.neighbours(datasetId, vectors.id, part, MAX_DISTANCE, NEIGHBOURS_KEPT);
      warmups.push((performance.now() - w0) / 1000);
    }
    const warmupS = warmups[0]!;
    process.stderr.write(
      `[${engine}] warm-up searches: ${warmups.map((w) => w.toFixed(2)).join(', ')} s\n`,
    );

    const esBefore = engine === 'elasticsearch' ? await esCpuSeconds() : 0;
    const load0 = os.loadavg()[0]!;
    const cpu0 = process.cpuUsage();
    const p0 = performance.now();
    // the service's own loop: slices of the one dataset until it is done
    await pass.pass();
    const passS = (performance.now() - p0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const esCpu = engine === 'elasticsearch' ? (await esCpuSeconds()) - esBefore : undefined;
    const load1 = os.loadavg()[0]!;
    const rssMib = Math.round(process.memoryUsage().rss / 2 ** 20);
    const state = await duplicates.state(datasetId);
    if (state.computedAt === undefined) throw new Error('the pass stored no computed_at');
    const searched = listed;
    if (searched !== (PASS_LIMIT ? Math.min(PASS_LIMIT, ITEMS) : ITEMS))
      throw new Error(`the pass listed ${searched} items of ${ITEMS}`);
    process.stderr.write(
      `[${engine}] pass over ${searched} of ${ITEMS} items: ${passS.toFixed(1)} s\n`,
    );

    const entries = await duplicates.entries(datasetId);
    const edges = entries.reduce((a, e) => a + e.neighbours.length, 0);
    const pairs = new Set(
      entries.flatMap((e) =>
        e.neighbours.map((n) => (e.id < n.id ? `${e.id} ${n.id}` : `${n.id} ${e.id}`)),
      ),
    );
    const full = searched === ITEMS;
    const step = searched / Math.min(RECALL_SAMPLE, searched);
    const sample = Array.from({ length: Math.min(RECALL_SAMPLE, searched) }, (_, k) =>
      Math.floor((k + 0.5) * step),
    );
    const r0 = performance.now();
    const quality = recall(
      vectors.real!,
      ITEMS,
      vectors.dimensions,
      sample,
      entries,
      full,
      defaultMaxDistance(vectors.id),
      kinds,
    );
    process.stderr.write(
      `[${engine}] recall over ${sample.length} items in ${((performance.now() - r0) / 1000).toFixed(1)} s\n`,
    );
    const cpuS = (cpu.user + cpu.system) / 1e6;
    const perItem = passS / searched;
    const fullS = full ? passS : perItem * ITEMS;
    const out: Record<string, unknown> = {
      engine,
      ...(LABEL ? { label: LABEL } : {}),
      date: new Date().toISOString(),
      ...revision(),
      service_build: BUILD,
      items: ITEMS,
      embedder: vectors.id,
      dimensions: vectors.dimensions,
      vectors: `${realVectors} real (bench/real-vectors.ts, a shuffled sample of the cache)${
        realVectors < ITEMS ? `, ${ITEMS - realVectors} random unit vectors` : ''
      }`,
      vector_sources: Object.fromEntries(
        [...new Set(kinds)].map((k) => [k, kinds.filter((x) => x === k).length]),
      ),
      ...(engine === 'elasticsearch'
        ? { index: 'force-merged to one segment (seed-items.ts)' }
        : {}),
      seed_seconds: round(loadS, 1),
      warmup_search_seconds: warmups.map((w) => round(w, 2)),
      warmup_note: `two neighbour searches of ${WARMUP_ITEMS} items each before the pass, outside it: the first builds the embedded engine's in-memory index; met adds the first to the pass`,
      warm_search_ms_per_item: round((warmups[1]! / WARMUP_ITEMS) * 1000, 1),
      items_searched: searched,
      pass_seconds: round(passS, 1),
      search_seconds: round(searchMs / 1000, 1),
      items_per_s: round(searched / passS, 1),
      process_cpu_seconds: round(cpuS, 1),
      ...(esCpu !== undefined ? { elasticsearch_cpu_seconds: round(esCpu, 1) } : {}),
      cpu_seconds_per_1000_items: round(((cpuS + (esCpu ?? 0)) / searched) * 1000, 2),
      full_pass_seconds: round(fullS, 1),
      full_pass: full ? 'measured' : `extrapolated from the first ${searched} items' rate`,
      goal_seconds: PASS_GOAL_S,
      met: fullS + warmupS <= PASS_GOAL_S,
      load_1m: [round(load0, 1), round(load1, 1)],
      rss_mib_after: rssMib,
      stored_entries: entries.length,
      stored_neighbour_edges: edges,
      stored_pairs: pairs.size,
      entries_at_cap: entries.filter((e) => e.neighbours.length >= NEIGHBOURS_KEPT).length,
      recall: quality,
    };
    process.stderr.write(`${JSON.stringify(out)}\n`);
    return out;
  } finally {
    if (running) await app.stop();
    await close?.();
    await deleteInstallation(config);
  }
}

async function measurePass(): Promise<string> {
  const engines = (['embedded', 'elasticsearch'] as Engine[]).filter(
    (e) => !ONLY || ONLY.split(',').includes(e),
  );
  const { vectors, real, kinds } = await passVectors(ITEMS);
  const runs: Array<Record<string, unknown>> = [];
  const file = path.join(RESULTS_DIR, 'duplicates-pass.json');
  // another engine's or size's last run stays beside the new ones (each run has its date)
  const key = (r: Record<string, unknown>) =>
    `${String(r.engine)} ${String(r.items)}${r.label ? ` ${String(r.label)}` : ''}`;
  const old = fs.existsSync(file)
    ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { runs: typeof runs }).runs
    : [];
  for (const engine of engines) {
    runs.push(await passRun(engine, vectors, real, kinds));
    const mine = new Set(runs.map(key));
    const all = [...runs, ...old.filter((r) => !mine.has(key(r)))];
    all.sort((a, b) => key(a).localeCompare(key(b), 'en', { numeric: true }));
    writeResult('duplicates-pass', {
      benchmark: 'duplicates-pass',
      date: new Date().toISOString(),
      machine: { ...machine(), cpus_allowed: cpusAllowed() },
      note: `DuplicatePass.pass() (in slices, as a worker runs it) on the engine's ports in this process (no server), first pass over every item of one dataset; goal: a full pass over 100,000 items within ${PASS_GOAL_S} s on two cores (met counts the warm-up search too). Recall: brute force (exact cosine over every seeded vector) for ${RECALL_SAMPLE} evenly spread searched items.`,
      parameters: {
        max_distance: MAX_DISTANCE,
        neighbours_kept: NEIGHBOURS_KEPT,
        default_max_distance: defaultMaxDistance(vectors.id),
        pass_items_limit: PASS_LIMIT || null,
        recall_sample: RECALL_SAMPLE,
      },
      runs: all,
    });
  }
  return file;
}

/** Item n's image: food photo n mod 542, cropped and re-encoded more for each later copy. */
async function ingestImage(photos: Buffer[], n: number): Promise<Buffer> {
  const src = photos[n % photos.length]!;
  const k = Math.floor(n / photos.length);
  if (k === 0) return src;
  const m = await sharp(src).metadata();
  const [w, h] = [m.width!, m.height!];
  const cut = Math.min(0.3, 0.03 * k);
  const [cw, ch] = [Math.round(w * (1 - 2 * cut)), Math.round(h * (1 - 2 * cut))];
  return sharp(src)
    .extract({ left: Math.round(w * cut), top: Math.round(h * cut), width: cw, height: ch })
    .jpeg({ quality: Math.max(40, 92 - 8 * k) })
    .toBuffer();
}

/** The helper process: item n's image under /img/<n>.jpg, all made before it answers. */
async function serveImages(): Promise<void> {
  const photos = (await foodImages()).map((p) => p.bytes);
  const images: Buffer[] = [];
  for (let n = 0; n < INGEST_ITEMS; n++) images.push(await ingestImage(photos, n));
  const server = http.createServer((req, res) => {
    const n = Number(/\/img\/(\d+)\.jpg$/.exec(req.url ?? '')?.[1] ?? -1);
    if (!(n >= 0 && n < images.length)) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.end(images[n]);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.on('message', () => server.close(() => process.exit(0)));
  process.send!((server.address() as AddressInfo).port);
}

async function imageServer(): Promise<{ url: string; close(): void }> {
  const child = fork(__filename, ['serve-images'], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (p) => resolve(p as number));
    child.once('exit', (code) => reject(new Error(`image server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, close: () => child.send({ stop: true }) };
}

interface Report {
  computed_at: string | null;
  pending: boolean;
  groups: Array<{ kind: string; items: unknown[] }>;
}

async function ingestRound(
  setup: Setup,
  images: string,
  mode: 'A' | 'B',
  roundNo: number,
): Promise<Record<string, unknown>> {
  const app = await startRound(setup, roundTag('benchdup'), CONCURRENCY, {
    DUPLICATE_REPORT: mode === 'B' ? 'on' : 'off',
  });
  try {
    const { orgToken, datasetId } = await createDataset(app, 'ingest');
    const base = app.url!;
    const es = Boolean(setup.env.SEARCH_BACKEND);
    const es0 = es ? await esCpuSeconds() : 0;
    const cpu0 = process.cpuUsage();
    const load0 = os.loadavg()[0]!;
    const start = Date.now();
    for (let b = 0; b < INGEST_ITEMS; b += BATCH) {
      const content = Array.from({ length: Math.min(BATCH, INGEST_ITEMS - b) }, (_, i) => {
        const n = b + i;
        return {
          id: `item-${String(n).padStart(5, '0')}`,
          url: `${images}/img/${n}.jpg`,
          metadata: { category: `c${n % 12}`, price: n % 500 },
        };
      });
      const r = await call(base, 'POST', '/orgs/bench/datasets/ingest/content', orgToken, {
        content,
      });
      if (r.status !== 202) throw new Error(`POST content: ${r.status} ${JSON.stringify(r.body)}`);
    }
    let counts = { processed: 0, errors: 0 };
    for (;;) {
      counts = (await call(base, 'GET', '/orgs/bench/datasets/ingest', orgToken)).body.dataset
        .counts;
      if (counts.processed + counts.errors === INGEST_ITEMS) break;
      await wait(200);
    }
    const done = Date.now();
    const seconds = (done - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const esCpu = es ? (await esCpuSeconds()) - es0 : 0;
    const out: Record<string, unknown> = {
      round: roundNo,
      mode,
      setup: setup.name,
      duplicate_report: mode === 'B' ? 'on' : 'off',
      items: INGEST_ITEMS,
      processed: counts.processed,
      failed: counts.errors,
      seconds,
      processed_per_s: round(counts.processed / seconds, 1),
      service_cpu_ms_per_item: round((cpu.user + cpu.system) / 1e3 / INGEST_ITEMS),
      load_1m: [round(load0, 1), round(os.loadavg()[0]!, 1)],
      ...(es ? { es_cpu_ms_per_item: round((esCpu / INGEST_ITEMS) * 1000) } : {}),
    };
    if (mode === 'B') {
      // the last item's processedAt, from the store (the counts poll sees it up to 200 ms late)
      let last = 0;
      for (let after: string | undefined; ;) {
        const page = await app.container.ports.content.processedSince(
          datasetId,
          undefined,
          after,
          500,
        );
        for (const p of page) last = Math.max(last, p.processedAt);
        if (page.length < 500) break;
        after = page.at(-1)!.id;
      }
      const cpuSettle0 = process.cpuUsage();
      const esSettle0 = es ? await esCpuSeconds() : 0;
      let report: Report | undefined;
      for (;;) {
        const r = await call<Report>(
          base,
          'GET',
          '/orgs/bench/datasets/ingest/duplicates?limit=100',
          orgToken,
        );
        if (r.status !== 200)
          throw new Error(`GET duplicates: ${r.status} ${JSON.stringify(r.body)}`);
        if (!r.body.pending && r.body.computed_at !== null) {
          report = r.body;
          break;
        }
        if (Date.now() - done > SETTLE_TIMEOUT_S * 1000) break;
        await wait(250);
      }
      const settled = Date.now();
      const settleCpu = process.cpuUsage(cpuSettle0);
      const esSettle = es ? (await esCpuSeconds()) - esSettle0 : 0;
      out.settle = report
        ? {
            seconds_after_last_processed: round((settled - last) / 1000, 1),
            computed_at_after_last_processed: round(
              (Date.parse(report.computed_at!) - last) / 1000,
              1,
            ),
            service_cpu_seconds: round((settleCpu.user + settleCpu.system) / 1e6, 1),
            ...(es ? { es_cpu_seconds: round(esSettle, 1) } : {}),
            met: (settled - last) / 1000 <= SETTLE_GOAL_S,
            groups_first_page: report.groups.length,
            near_groups_first_page: report.groups.filter((g) => g.kind === 'near').length,
            largest_group: Math.max(0, ...report.groups.map((g) => g.items.length)),
          }
        : { timed_out_after_s: SETTLE_TIMEOUT_S, met: false };
    }
    process.stderr.write(`${JSON.stringify(out)}\n`);
    return out;
  } finally {
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function measureIngest(): Promise<string> {
  const file = path.join(RESULTS_DIR, 'duplicates-ingest.json');
  // with BENCH_SETUPS naming one set-up, the other's figures already in the file are kept
  const old =
    ONLY && fs.existsSync(file)
      ? (JSON.parse(fs.readFileSync(file, 'utf8')) as {
          summary: Array<{ setup: string }>;
          runs: Array<{ setup: string }>;
        })
      : { summary: [], runs: [] };
  const other = (x: { setup: string }) => !ONLY || !x.setup.startsWith(ONLY);
  const images = await imageServer();
  const runs: Array<Record<string, unknown>> = [];
  const summary: Array<Record<string, unknown>> = [];
  try {
    for (const s of SETUPS.filter((x) => !ONLY || x.name.startsWith(ONLY))) {
      const mine: Array<Record<string, unknown>> = [];
      for (let r = 1; r <= ROUNDS; r++)
        // A first in odd rounds, B first in even ones: neither always follows the other
        for (const mode of r % 2 ? (['A', 'B'] as const) : (['B', 'A'] as const))
          mine.push(await ingestRound(s, images.url, mode, r));
      runs.push(...mine);
      const of = (m: string, k: string) =>
        mine.filter((x) => x.mode === m).map((x) => x[k] as number);
      const [a, b] = [of('A', 'processed_per_s'), of('B', 'processed_per_s')];
      const ratios = a.map((x, i) => round(b[i]! / x, 3));
      const settles = mine
        .filter((x) => x.mode === 'B')
        .map((x) => x.settle as { seconds_after_last_processed?: number });
      const settleS = settles.map((x) => x.seconds_after_last_processed ?? null);
      summary.push({
        setup: s.name,
        a_processed_per_s: a,
        b_processed_per_s: b,
        round_ratios_b_over_a: ratios,
        median_ratio_b_over_a: median(ratios),
        ratio_of_medians: round(median(b) / median(a), 3),
        goal: INGEST_GOAL,
        met: median(ratios) >= INGEST_GOAL,
        median_service_cpu_ms_per_item: {
          a: median(of('A', 'service_cpu_ms_per_item')),
          b: median(of('B', 'service_cpu_ms_per_item')),
        },
        ...(s.env.SEARCH_BACKEND
          ? {
              median_es_cpu_ms_per_item: {
                a: median(of('A', 'es_cpu_ms_per_item')),
                b: median(of('B', 'es_cpu_ms_per_item')),
              },
            }
          : {}),
        settle_seconds_after_last_processed: settleS,
        settle_goal_seconds: SETTLE_GOAL_S,
        settle_met: settleS.every((x) => x !== null && x <= SETTLE_GOAL_S),
      });
      // written after every set-up, so a later one failing keeps what was measured
      writeResult('duplicates-ingest', {
        benchmark: 'duplicates-ingest',
        date: new Date().toISOString(),
        ...revision(),
        machine: { ...machine(), cpus_allowed: cpusAllowed() },
        note: `one process with api and worker roles; ${INGEST_ITEMS} items in batches of ${BATCH} (item n: food photo n mod 542, a centred crop and JPEG re-encode growing with n div 542), WORKER_CONCURRENCY ${CONCURRENCY}; A = DUPLICATE_REPORT=off, B = on (DUPLICATE_PASS_MS default); rounds interleaved A B, B A, A B, …, each a fresh installation; settle = until GET …/duplicates answers pending: false with a computed_at, from the last item's processedAt`,
        parameters: { items: INGEST_ITEMS, batch: BATCH, rounds: ROUNDS },
        summary: [...old.summary.filter(other), ...summary],
        runs: [...old.runs.filter(other), ...runs],
      });
    }
  } finally {
    images.close();
  }
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  return file;
}

async function main(): Promise<void> {
  // two cores: pin this process (and the helper it forks) when the machine has more
  if (os.cpus().length > 2 && !process.env.BENCH_PINNED) {
    const r = spawnSync('taskset', ['-c', '0,1', process.execPath, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...process.env, BENCH_PINNED: '1' },
    });
    process.exit(r.status ?? 1);
  }
  const files: string[] = [];
  if (MEASURES.includes('pass')) files.push(await measurePass());
  if (MEASURES.includes('ingest')) files.push(await measureIngest());
  process.stdout.write(`written to ${files.join(', ')}\n`);
}

(process.argv[2] === 'serve-images' ? serveImages() : main()).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
