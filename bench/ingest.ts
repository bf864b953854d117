/**
 * Ingest throughput on both production shapes: items accepted per second by POST content
 * (validated, stored durably, queued) and images processed per second by the workers
 * (downloaded from a local image server, decoded with sharp, embedded with the default
 * embedder, recorded), and `ratio_to_raw`: processed per second ÷ the raw analyzer's rate on
 * the same images in the same run, measured just before and just after each set-up.
 *
 * Each is measured at every model batch size of BENCH_EMBEDDER_BATCH (default 8 and 1: batched
 * as shipped, and one image a run), the raw analyzer at the same size beside it. At the first
 * (shipped) size the set-ups run BENCH_INGEST_ROUNDS rounds, interleaved, and `summary` holds
 * each set-up's median ratio: single runs of the same code spread from 0.74 to 0.87 of their
 * raw loops on this machine, so one run is one draw from that spread.
 *
 *   npm run bench:ingest            (BENCH_INGEST_ITEMS, BENCH_BATCH, WORKER_CONCURRENCY,
 *                                    BENCH_SETUPS=embedded|elasticsearch for one set-up,
 *                                    BENCH_EMBEDDER_BATCH=8,1, BENCH_INGEST_ROUNDS=3)
 */
import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from 'visual-search-service/dist/config/env';
import {
  SETUPS,
  type Setup,
  call,
  cpuSeconds,
  createDataset,
  deleteInstallation,
  ingestImages,
  machine,
  median,
  pidOnPort,
  startRound,
  roundTag,
  writeResult,
} from './common';
import { rawAnalyzerLoop } from './raw-analyzer';

const ITEMS = Number(process.env.BENCH_INGEST_ITEMS ?? 5000);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const CONCURRENCY = process.env.WORKER_CONCURRENCY ?? '8';
/** Images per model run (EMBEDDER_BATCH); the first is the shipped default. */
const EMBEDDER_BATCHES = (process.env.BENCH_EMBEDDER_BATCH ?? '8,1').split(',').map(Number);
/** Rounds of every set-up at the first batch size; the others run once, for comparison. */
const ROUNDS = Number(process.env.BENCH_INGEST_ROUNDS ?? 3);

/**
 * The images, served under any /img/<n>.jpg path by a process of its own, as a remote image
 * host would be: its work is not the service's (it is accounted separately below).
 */
async function serveImages(): Promise<void> {
  const images = await ingestImages();
  const server = http.createServer((req, res) => {
    const n = Number(/(\d+)\.jpg$/.exec(req.url ?? '')?.[1] ?? 0);
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.end(images[n % images.length]);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.send!((server.address() as AddressInfo).port);
  process.once('message', () => server.close(() => process.exit(0)));
}

async function imageServer(): Promise<{ url: string; pid: number; close(): void }> {
  const child = fork(__filename, ['serve-images'], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (p) => resolve(p as number));
    child.once('exit', (code) => reject(new Error(`image server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, close: () => child.send('stop') };
}

/** CPU seconds of each process that takes part, so a run shows where its time went. */
function cpuMeter(imagePid: number) {
  const pids: Record<string, number | undefined> = {
    elasticsearch: pidOnPort(9200),
    rabbitmq: pidOnPort(5672),
    image_server: imagePid,
  };
  const read = () => {
    const u = process.cpuUsage();
    const out: Record<string, number> = { service: (u.user + u.system) / 1e6 };
    for (const [k, pid] of Object.entries(pids)) if (pid) out[k] = cpuSeconds(pid);
    return out;
  };
  const start = read();
  return (items: number): Record<string, number> => {
    const end = read();
    return Object.fromEntries(
      Object.keys(end).map((k) => [k, Math.round(((end[k]! - start[k]!) / items) * 1e5) / 100]),
    );
  };
}

async function run(
  setup: Setup,
  images: string,
  imagePid: number,
  embedderBatch: number,
): Promise<Record<string, unknown>> {
  const app = await startRound(setup, roundTag('bench'), CONCURRENCY, {
    EMBEDDER_BATCH: String(embedderBatch),
  });
  try {
    const { orgToken } = await createDataset(app, 'ingest');
    const base = app.url!;
    const cpu = cpuMeter(imagePid);
    const start = Date.now();
    for (let b = 0; b < ITEMS; b += BATCH) {
      const content = Array.from({ length: Math.min(BATCH, ITEMS - b) }, (_, i) => {
        const n = b + i;
        return {
          id: `item-${n}`,
          url: `${images}/img/${n}.jpg`,
          metadata: { category: `c${n % 12}`, price: n % 500, tags: [`t${n % 7}`] },
        };
      });
      const r = await call(base, 'POST', '/orgs/bench/datasets/ingest/content', orgToken, {
        content,
      });
      if (r.status !== 202) throw new Error(`POST content: ${r.status} ${JSON.stringify(r.body)}`);
    }
    const acceptedS = (Date.now() - start) / 1000;
    for (;;) {
      const r = await call(base, 'GET', '/orgs/bench/datasets/ingest', orgToken);
      const c = r.body.dataset.counts;
      if (c.errors > 0) throw new Error(`processing errors: ${JSON.stringify(c)}`);
      if (c.processed === ITEMS) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    const processedS = (Date.now() - start) / 1000;
    const runs = (await app.container.services.metrics.embedderRunImages.get()).values;
    const of = (name: string) => runs.find((v) => v.metricName === name)?.value ?? 0;
    const out = {
      setup: setup.name,
      embedder_batch: embedderBatch,
      // what the model was actually given (a run's images, averaged over the run)
      mean_images_per_model_run:
        Math.round((of('embedder_run_images_sum') / of('embedder_run_images_count')) * 100) / 100,
      items: ITEMS,
      batch: BATCH,
      worker_concurrency: Number(CONCURRENCY),
      accept_seconds: acceptedS,
      items_accepted_per_s: Math.round(ITEMS / acceptedS),
      all_processed_seconds: processedS,
      images_processed_per_s: Math.round((ITEMS / processedS) * 10) / 10,
      // the service process's CPU also holds this bench's client (the POSTs and the polling)
      cpu_ms_per_image: cpu(ITEMS),
    };
    process.stderr.write(`${JSON.stringify(out)}\n`);
    return out;
  } finally {
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

type RawLoop = Awaited<ReturnType<typeof rawAnalyzerLoop>> & { embedder_batch: number };

/** The ceiling: the raw analyzer with the default embedder — what ingest is compared with. */
async function rawLoop(images: Buffer[], maxBatch: number): Promise<RawLoop> {
  const r = await rawAnalyzerLoop(images, {
    kind: loadConfig({}).EMBEDDER,
    embedder: { maxBatch },
    images: Math.min(ITEMS, 2000),
    concurrency: Number(CONCURRENCY),
  });
  process.stderr.write(`raw analyzer (${r.embedder}, batch ${maxBatch}): ${r.per_s} images/s\n`);
  return { embedder_batch: maxBatch, ...r };
}

/** Each set-up's ratios at each batch size, in run order, and their median. */
function medianRatios(runs: Array<Record<string, unknown>>) {
  const groups = new Map<string, Array<Record<string, unknown>>>();
  for (const r of runs) {
    const key = `${String(r.setup)}\u0000${String(r.embedder_batch)}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()].map((rs) => {
    const ratios = rs.map((r) => r.ratio_to_raw as number);
    return {
      setup: rs[0]!.setup,
      embedder_batch: rs[0]!.embedder_batch,
      ratios_to_raw: ratios,
      median_ratio_to_raw: median(ratios),
    };
  });
}

async function main(): Promise<void> {
  const images = await ingestImages();
  const img = await imageServer();
  const runs: Array<Record<string, unknown>> = [];
  const raws: Array<RawLoop & { loops_per_s: number[] }> = [];
  try {
    // BENCH_SETUPS=embedded or =elasticsearch runs one set-up (a profile of one, say)
    const only = process.env.BENCH_SETUPS;
    for (const [b, batch] of EMBEDDER_BATCHES.entries()) {
      // The raw loop runs before every set-up and once more after the last, and each set-up is
      // divided by the mean of the loops just before and just after it: this machine's speed
      // drifts (raw loops of one session ranged from 85 to 113 images/s), and a ceiling read
      // only before would carry that drift into the ratio.
      const loops = [await rawLoop(images, batch)];
      for (let round = 1; round <= (b === 0 ? ROUNDS : 1); round++)
        for (const s of SETUPS.filter((x) => !only || x.name.startsWith(only))) {
          const r = await run(s, img.url, img.pid, batch);
          const before = loops[loops.length - 1]!;
          const after = await rawLoop(images, batch);
          loops.push(after);
          const ceiling = (before.per_s + after.per_s) / 2;
          runs.push({
            round,
            ...r,
            raw_per_s_before: before.per_s,
            raw_per_s_after: after.per_s,
            ratio_to_raw: Math.round(((r.images_processed_per_s as number) / ceiling) * 100) / 100,
          });
        }
      const mean = (f: (l: RawLoop) => number) =>
        Math.round((loops.reduce((a, l) => a + f(l), 0) / loops.length) * 100) / 100;
      raws.push({
        embedder_batch: batch,
        embedder: loops[0]!.embedder,
        per_s: mean((l) => l.per_s),
        cpu_ms_per_image: mean((l) => l.cpu_ms_per_image),
        loops_per_s: loops.map((l) => l.per_s),
      });
    }
  } finally {
    img.close();
  }
  const raw = raws[0]!;
  const file = writeResult('ingest', {
    benchmark: 'ingest',
    date: new Date().toISOString(),
    machine: machine(),
    note: 'one process with api and worker roles; images 800x600 JPEG from a local server',
    embedder: raw.embedder,
    raw_analyzer: {
      images_per_s: raw.per_s,
      cpu_ms_per_image: raw.cpu_ms_per_image,
      what: 'decode + embed in this process, no fetch/store/queue, same images and concurrency; the mean of the loops run before, between and after the set-ups in this run',
    },
    raw_analyzer_by_embedder_batch: raws,
    ratio_note:
      'each run is divided by the mean of the raw loops just before and just after it (raw_per_s_before, raw_per_s_after), at its own embedder_batch; summary gives the median over the rounds',
    summary: medianRatios(runs),
    runs,
  });
  process.stdout.write(`written to ${file}\n`);
}

(process.argv[2] === 'serve-images' ? serveImages() : main()).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
