/**
 * The raw analyzer loop: the project's own decode + embed (no fetch, no store, no queue) over
 * the same images, `concurrency` at a time as a worker runs them. bench:ingest divides ingest by
 * it; bench:analyzer compares the float and the 8-bit model with it.
 */
import {
  createEmbedder,
  type EmbedderOptions,
} from 'visual-search-service/dist/adapters/embedders';
import { SharpImageAnalyzer } from 'visual-search-service/dist/adapters/images/sharp-analyzer';
import type { EmbedderKind } from 'visual-search-service/dist/config/env';

export interface RawLoop {
  embedder: string;
  per_s: number;
  cpu_ms_per_image: number;
}

export async function rawAnalyzerLoop(
  images: Buffer[],
  opts: {
    kind: EmbedderKind;
    embedder?: EmbedderOptions;
    images: number;
    concurrency: number;
    /** Images analysed first, untimed: a session's first runs allocate its arena. */
    warmup?: number;
  },
): Promise<RawLoop> {
  const embedder = await createEmbedder(opts.kind, opts.embedder);
  const analyzer = new SharpImageAnalyzer(embedder);
  for (let i = 0; i < (opts.warmup ?? 0); i++) await analyzer.analyze(images[i % images.length]!);
  let next = 0;
  const start = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (next < opts.images) await analyzer.analyze(images[next++ % images.length]!);
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  const s = Number(process.hrtime.bigint() - start) / 1e9;
  await embedder.close?.();
  return {
    embedder: embedder.id,
    per_s: Math.round((opts.images / s) * 10) / 10,
    cpu_ms_per_image: Math.round(((cpu.user + cpu.system) / 1e3 / opts.images) * 100) / 100,
  };
}
