/**
 * The raw analyzer (decode + embed, no fetch, no store, no queue) with the float and the 8-bit
 * EfficientNet-Lite0 in the default hybrid embedder: images per second and CPU per image,
 * `WORKER_CONCURRENCY` images at a time as a worker runs them, the two models alternated round
 * by round (ABBA) so that the machine's drift falls on both. Two image sets: bench:ingest's
 * 800 × 600 JPEGs (the figure issue 41 states) and the 542 food photos (small real JPEGs).
 * Quality under int8 is bench:similarity's (`BENCH_EMBEDDERS=hybrid,hybrid-int8`).
 *
 *   npm run bench:analyzer   (BENCH_ROUNDS=3, BENCH_IMAGES=600)
 */
import os from 'node:os';
import type { ModelPrecision } from 'visual-search-service/dist/config/env';
import { ingestImages, machine, median, writeResult } from './common';
import { rawAnalyzerLoop } from './raw-analyzer';
import { foodImages } from './food-images';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const IMAGES = Number(process.env.BENCH_IMAGES ?? 600);
const CONCURRENCY = Number(process.env.WORKER_CONCURRENCY ?? 8);
const PRECISIONS: ModelPrecision[] = ['float32', 'int8'];

type Loop = Awaited<ReturnType<typeof rawAnalyzerLoop>> & { load_1m: number };

async function loop(images: Buffer[], precision: ModelPrecision): Promise<Loop> {
  const r = await rawAnalyzerLoop(images, {
    kind: 'hybrid',
    embedder: { precision },
    images: IMAGES,
    concurrency: CONCURRENCY,
    warmup: 8,
  });
  return { ...r, load_1m: Math.round(os.loadavg()[0]! * 100) / 100 };
}

async function main(): Promise<void> {
  const sets: Record<string, Buffer[]> = {
    'ingest-800x600': await ingestImages(),
    'food-photos': (await foodImages()).map((i) => i.bytes),
  };
  const rounds: Array<Record<string, unknown>> = [];
  const summary: Record<string, unknown> = {};
  for (const [name, images] of Object.entries(sets)) {
    const ratios: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 ? [...PRECISIONS].reverse() : PRECISIONS;
      const got: Partial<Record<ModelPrecision, Loop>> = {};
      for (const p of order) got[p] = await loop(images, p);
      const ratio = Math.round((got.int8!.per_s / got.float32!.per_s) * 100) / 100;
      ratios.push(ratio);
      rounds.push({ image_set: name, round: r, order, ...got, int8_over_float32: ratio });
      console.log(`${name} round ${r}: ${JSON.stringify(got)} → ${ratio}`);
    }
    summary[name] = { median_int8_over_float32: median(ratios), ratios };
  }
  const file = writeResult('analyzer', {
    benchmark: 'analyzer',
    date: new Date().toISOString(),
    machine: machine(),
    embedder: 'hybrid (default weights), EMBEDDER_PRECISION float32 against int8',
    images_per_loop: IMAGES,
    concurrency: CONCURRENCY,
    goal: 'raw analyzer images per second ≥ 1.5 × with food P@10 and lens R@1 within 0.01 (issue 41)',
    summary,
    rounds,
  });
  console.log(JSON.stringify(summary), '→', file);
}

void main().catch((e) => {
  console.error(e);
  process.exit(1);
});
