/**
 * What running several images in one EfficientNet-Lite0 run saves: model time per image at
 * each batch size, through the service's own session (SerialSession on its thread, the shipped
 * model, EMBEDDER_THREADS = the cores), the sizes interleaved round by round so that drift in
 * the machine's load falls on all of them alike. This is the model alone; bench:ingest measures
 * what it does to ingest. Each size's peak memory is measured in a process of its own (the
 * runtime keeps its arena at its peak).
 *
 *   npm run bench:model-batch   (BENCH_BATCH_SIZES=1,2,4,8,16, BENCH_ROUNDS=30)
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { EfficientNetEmbedder } from 'visual-search-service/dist/adapters/embedders/efficientnet';
import { machine, summarize, writeResult } from './common';

const SIZES = (process.env.BENCH_BATCH_SIZES ?? '1,2,4,8,16').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);

/** Distinct images, so no run is a copy of another. */
const pixels = (k: number) => ({
  data: new Uint8Array(224 * 224 * 3).map((_, i) => (i * (k + 5) + k * 29) % 256),
  size: 224,
});

/** In a child process: one session, runs of `n`, the process's peak resident memory in MB. */
async function peakMemory(n: number): Promise<void> {
  const model = await EfficientNetEmbedder.load({ maxBatch: n });
  const images = Array.from({ length: n }, (_, k) => pixels(k));
  for (let r = 0; r < 10; r++) await Promise.all(images.map((p) => model.embed(p)));
  await model.close();
  process.stdout.write(`${Math.round(process.resourceUsage().maxRSS / 1024)}\n`);
}

async function main(): Promise<void> {
  const threads = os.availableParallelism();
  const largest = Math.max(...SIZES);
  const runSizes = new Map<number, number[]>(SIZES.map((n) => [n, []]));
  // One session, as in the service: sessions side by side would share the cores with each
  // other's idle spinning threads. Images asked for in one turn go to it as one run, so a
  // measurement of n images is one run of n.
  let current = 0;
  const model = await EfficientNetEmbedder.load({
    threads,
    maxBatch: largest,
    onRun: (images) => runSizes.get(current)?.push(images),
  });
  const images = Array.from({ length: largest }, (_, k) => pixels(k));
  const perImage = new Map<number, number[]>(SIZES.map((n) => [n, []]));
  try {
    for (let round = -3; round < ROUNDS; round++)
      for (const n of round % 2 ? SIZES : [...SIZES].reverse()) {
        current = round >= 0 ? n : 0;
        const t0 = process.hrtime.bigint();
        await Promise.all(images.slice(0, n).map((p) => model.embed(p)));
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        if (round >= 0) perImage.get(n)!.push(ms / n);
      }
  } finally {
    await model.close();
  }
  const one = summarize(perImage.get(SIZES[0]!)!).p50;
  const runs = SIZES.map((n) => {
    const s = summarize(perImage.get(n)!);
    const peak = execFileSync(process.execPath, [__filename, 'peak-memory', String(n)], {
      encoding: 'utf8',
    });
    return {
      batch: n,
      ms_per_image: s,
      p50_vs_batch_of_1: SIZES[0] === 1 ? Math.round((s.p50 / one) * 1000) / 1000 : undefined,
      process_peak_rss_mb: Number(peak.trim()),
    };
  });
  // what was measured is what it says: every run of size n had n images
  for (const [n, sizes] of runSizes)
    if (sizes.some((k) => k !== n)) throw new Error(`batch ${n}: runs of ${sizes.join(',')}`);
  const file = writeResult('model-batch', {
    benchmark: 'model-batch',
    date: new Date().toISOString(),
    machine: machine(),
    threads,
    rounds: ROUNDS,
    note: 'wall time of a run of n queued images divided by n, the shipped model on its own thread, sizes interleaved',
    runs,
  });
  process.stdout.write(`${JSON.stringify(runs, null, 2)}\nwritten to ${file}\n`);
}

(process.argv[2] === 'peak-memory' ? peakMemory(Number(process.argv[3])) : main()).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
