/**
 * The embedded engine at BENCH_ITEMS (1,000,000) items, issue 41's last row: RSS ≤ 3 GB, search
 * p95 ≤ 50 ms, filtered similar p95 ≤ 300 ms, start-up ≤ 60 s. The catalogue of the search bench
 * (bench/catalogue.ts, 1,420-d vectors of the default embedder: the real images' vectors of
 * bench/real-vectors.ts when that many are cached, random unit vectors otherwise) is seeded
 * in bounded transactions, then served by a fresh `node dist/main.js` on that data directory,
 * as `npm start` runs it, in a child process of its own so its RSS is the service's.
 *
 * Start-up: from the spawn until /readyz answers, until the first search answers (it waits for
 * the dataset's in-memory index, built in the background on first use), and until the first
 * similar answers (it waits for the vector matrix, which the service starts loading with the
 * index); meanwhile /readyz is asked every 100 ms and its
 * answer times kept (a long synchronous stretch shows as one slow answer). Then BENCH_REQUESTS (300) each, after 20 warm-up
 * requests: the listing search of bench/search-latency.ts, similar by id unfiltered and with a
 * q filter. VmRSS after each phase and the kernel's high-water mark (VmHWM) at the end.
 *
 * To compare builds of the service, BENCH_DISTS names their `dist` directories (comma-separated)
 * and BENCH_ROUNDS how many times each is started on the one seeded directory, in alternating
 * order (A B, B A, …); the runs and each build's medians go to embedded-scale-compare-<items>.json
 * (200k, 1m, …).
 * A build's parent directory must hold the project's package.json and models/ (links will do),
 * with node_modules reachable above it, as inside a directory of this checkout.
 *
 *   npm run bench:embedded-scale   (BENCH_ITEMS (1000000), BENCH_REQUESTS (300),
 *                                   BENCH_DISTS (the installed build), BENCH_ROUNDS (1))
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { catalogue, listingQuery } from './catalogue';
import {
  OPERATOR,
  createDataset,
  gatewayClient,
  machine,
  startService,
  summarize,
  timed,
  writeResult,
} from './common';
import { HYBRID_VECTORS, seedEmbedded, withRealVectors } from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 1_000_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300);
const WARMUP = 20;
const DISTS = (process.env.BENCH_DISTS ?? '').split(',').filter(Boolean);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);

const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const s = net.createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => done(port));
    });
  });

function statusMib(pid: number, key: 'VmRSS' | 'VmHWM'): number {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${key}:`));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

async function main(): Promise<void> {
  // the dataset and its tokens, made through the service, then the items written straight
  const app = await startService({ APP_ROLES: 'api', EMBEDDER: HYBRID_VECTORS.kind });
  const dataDir = app.container.config.dataDir;
  const { dsToken, datasetId } = await createDataset(app, 'shoes');
  await app.stop();
  try {
    const vectors = await withRealVectors(HYBRID_VECTORS, ITEMS);
    const s0 = Date.now();
    seedEmbedded(dataDir, datasetId, catalogue(ITEMS), vectors);
    const seedS = (Date.now() - s0) / 1000;
    const dbBytes = fs
      .readdirSync(dataDir)
      .filter((f) => f.startsWith('store.db'))
      .reduce((n, f) => n + fs.statSync(path.join(dataDir, f)).size, 0);
    process.stderr.write(`seeded ${ITEMS} items in ${seedS.toFixed(1)} s\n`);
    const seeded = {
      seeded_at: new Date().toISOString(),
      machine: machine(),
      items: ITEMS,
      embedder: vectors.id,
      dimensions: vectors.dimensions,
      vectors: vectors.real
        ? `real (bench/real-vectors.ts) for the cached rows, random unit vectors for the rest`
        : 'random unit vectors',
      seed_seconds: seedS,
      store_bytes: dbBytes,
      notes:
        'search: the listing query of bench/search-latency.ts (q filter + sort + page); similar: GET similar?id=…&limit=10, filtered adds q=category:boots,instock:true; start-up from the spawn of node dist/main.js',
      goals: GOALS,
    };
    if (!DISTS.length) {
      const run = await serve(require.resolve('visual-search-service/dist/main'), dataDir, dsToken);
      const out = { date: new Date().toISOString(), ...seeded, ...run, met: metOf(run) };
      console.log(JSON.stringify(out));
      console.log(`written to ${writeResult('embedded-scale', out)}`);
      return;
    }
    const runs: Array<{ dist: string; round: number } & Run> = [];
    for (let round = 0; round < ROUNDS; round++)
      for (const dist of round % 2 ? [...DISTS].reverse() : DISTS) {
        process.stderr.write(`round ${round + 1}: ${dist}\n`);
        runs.push({
          dist,
          round,
          ...(await serve(path.join(path.resolve(dist), 'main.js'), dataDir, dsToken)),
        });
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const medians = Object.fromEntries(
      DISTS.map((dist) => {
        const of = runs.filter((r) => r.dist === dist);
        return [
          dist,
          {
            first_search_s: median(of.map((r) => r.start_up_seconds.first_search)),
            first_similar_s: median(of.map((r) => r.start_up_seconds.first_similar)),
            rss_index_mib: median(of.map((r) => r.rss_mib.index)),
            rss_vectors_mib: median(of.map((r) => r.rss_mib.vectors)),
            rss_end_mib: median(of.map((r) => r.rss_mib.end)),
            rss_peak_mib: median(of.map((r) => r.rss_mib.peak)),
            search_p95_ms: median(of.map((r) => r.search_ms.p95)),
            similar_p95_ms: median(of.map((r) => r.similar_ms.p95)),
            similar_filtered_p95_ms: median(of.map((r) => r.similar_filtered_ms.p95)),
          },
        ];
      }),
    );
    const out = {
      date: new Date().toISOString(),
      ...seeded,
      rounds: ROUNDS,
      commits: Object.fromEntries(DISTS.map((dist) => [dist, commitOf(dist)])),
      medians,
      runs,
    };
    console.log(JSON.stringify(medians, null, 2));
    const size = ITEMS % 1_000_000 ? `${ITEMS / 1000}k` : `${ITEMS / 1_000_000}m`;
    console.log(`written to ${writeResult(`embedded-scale-compare-${size}`, out)}`);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const GOALS = {
  rss_max_mib: 3 * 1024,
  search_p95_ms: 50,
  similar_filtered_p95_ms: 300,
  start_up_s: 60,
};

const metOf = (run: Run) => ({
  rss: run.rss_mib.peak <= GOALS.rss_max_mib,
  search: run.search_ms.p95 <= GOALS.search_p95_ms,
  similar_filtered: run.similar_filtered_ms.p95 <= GOALS.similar_filtered_p95_ms,
  start_up: run.start_up_seconds.first_similar <= GOALS.start_up_s,
});

type Run = Awaited<ReturnType<typeof serve>>;

/** The commit checked out above a build's dist directory, if it is in a git work tree. */
function commitOf(dist: string): string | undefined {
  try {
    return execFileSync('git', ['-C', path.dirname(path.resolve(dist)), 'rev-parse', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

/** Starts `entry` (a build's dist/main.js) on the seeded directory and measures it. */
async function serve(entry: string, dataDir: string, dsToken: string) {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [entry], {
    env: {
      ...process.env,
      MALLOC_TRIM_THRESHOLD_: '131072',
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      OPERATOR_TOKEN: OPERATOR,
      APP_ROLES: 'api',
      EMBEDDER: HYBRID_VECTORS.kind,
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const pid = child.pid!;
  const base = `http://127.0.0.1:${port}`;
  try {
    for (;;) {
      const ok = await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`service exited ${child.exitCode ?? child.signalCode}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const readyS = (performance.now() - t0) / 1000;
    const rssReady = statusMib(pid, 'VmRSS');
    const client = gatewayClient(base);
    // How long /readyz takes to answer while the index builds and the vectors load: a
    // stretch of synchronous work shows as one slow answer.
    const probe = { ms: [] as number[], on: true };
    const probing = (async () => {
      while (probe.on) {
        const t = performance.now();
        await fetch(`${base}/readyz`).then((r) => r.arrayBuffer());
        probe.ms.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const search = async (i: number) => {
      const p = new URLSearchParams(
        Object.entries(listingQuery(i)).map(([k, v]): [string, string] => [k, String(v)]),
      );
      const r = await client.get<{ results: unknown[] }>(
        `/orgs/bench/datasets/shoes/search?${p}`,
        dsToken,
      );
      if (r.status !== 200 || !r.body.results.length)
        throw new Error(`search: ${JSON.stringify(r.body).slice(0, 300)}`);
    };
    const skuOf = (i: number) => `sku-${String((i * 7919) % ITEMS).padStart(7, '0')}`;
    const similar = (q: string) => async (i: number) => {
      const r = await client.get<{ results: unknown[] }>(
        `/orgs/bench/datasets/shoes/similar?id=${skuOf(i)}&limit=10${q}`,
        dsToken,
      );
      if (r.status !== 200 || r.body.results.length !== 10)
        throw new Error(`similar: ${JSON.stringify(r.body).slice(0, 300)}`);
    };
    await search(0);
    const firstSearchS = (performance.now() - t0) / 1000;
    const rssIndex = statusMib(pid, 'VmRSS');
    await similar('')(0);
    const firstSimilarS = (performance.now() - t0) / 1000;
    const rssVectors = statusMib(pid, 'VmRSS');
    probe.on = false;
    await probing;
    process.stderr.write(
      `ready ${readyS.toFixed(1)} s, first search ${firstSearchS.toFixed(1)} s, first similar ${firstSimilarS.toFixed(1)} s\n`,
    );
    const searchMs = await timed(search, REQUESTS, WARMUP);
    const similarMs = await timed(similar(''), REQUESTS, WARMUP);
    const filteredMs = await timed(similar('&q=category:boots,instock:true'), REQUESTS, WARMUP);
    const rssEnd = statusMib(pid, 'VmRSS');
    const hwm = statusMib(pid, 'VmHWM');
    await client.close();
    return {
      start_up_seconds: {
        ready: readyS,
        first_search: firstSearchS,
        first_similar: firstSimilarS,
      },
      readyz_during_start_up_ms: { ...summarize(probe.ms), max: Math.max(...probe.ms) },
      rss_mib: { ready: rssReady, index: rssIndex, vectors: rssVectors, end: rssEnd, peak: hwm },
      search_ms: summarize(searchMs),
      similar_ms: summarize(similarMs),
      similar_filtered_ms: summarize(filteredMs),
    };
  } finally {
    child.kill();
    await new Promise((r) =>
      child.exitCode === null && child.signalCode === null ? child.once('exit', r) : r(undefined),
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
