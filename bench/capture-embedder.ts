import type { Embedder, Pixels } from 'visual-search-service/dist/ports/embedder';

/**
 * Keeps the pixels the analyzer hands its embedder, so a bench can embed exactly what the
 * service would (the same decode, and a lens query's views) with the parts kept apart.
 */
export class Capture implements Embedder {
  readonly id = 'capture';
  readonly dimensions = 0;
  constructor(readonly inputSize: number) {}
  seen: Pixels[] = [];
  embed(p: Pixels): Promise<Float32Array> {
    this.seen.push({ data: Buffer.from(p.data), size: p.size });
    return Promise.resolve(new Float32Array(0));
  }
}
