import sharp from 'sharp';
import type { Embedder, Pixels } from '../../ports/embedder';
import { areaResize } from './area-resize';
import { normalise } from './unit';

/** How a part that wants a smaller input gets it: libvips's Lanczos, or area averaging. */
export type Resample = 'lanczos' | 'area';

export interface WeightedPart {
  embedder: Embedder;
  weight: number;
}

/** The same decoded image at a smaller square size, for a part that wants less. */
async function resized(p: Pixels, size: number, how: Resample): Promise<Pixels> {
  if (p.size === size) return p;
  if (how === 'area') return areaResize(p, size);
  const data = await sharp(Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength), {
    raw: { width: p.size, height: p.size, channels: 3 },
  })
    .resize(size, size, { fit: 'fill' })
    .raw()
    .toBuffer();
  return { data, size };
}

/**
 * Several embedders side by side: each part's unit vector scaled by its weight, concatenated
 * and normalised again, so cosine similarity is the weighted mean of the parts' cosines
 * (weights² as shares). The image is decoded once, at the largest input any part takes.
 */
export class HybridEmbedder implements Embedder {
  readonly dimensions: number;
  readonly inputSize: number;

  constructor(
    readonly id: string,
    private readonly parts: WeightedPart[],
    private readonly resample: Resample = 'lanczos',
  ) {
    this.dimensions = parts.reduce((n, p) => n + p.embedder.dimensions, 0);
    this.inputSize = Math.max(...parts.map((p) => p.embedder.inputSize));
  }

  async embed(p: Pixels): Promise<Float32Array> {
    const vectors = await Promise.all(
      this.parts.map(async ({ embedder }) =>
        embedder.embed(await resized(p, embedder.inputSize, this.resample)),
      ),
    );
    const out = new Float32Array(this.dimensions);
    let at = 0;
    this.parts.forEach(({ weight }, i) => {
      const v = vectors[i]!;
      out.set(v, at);
      normalise(out, at, at + v.length, weight);
      at += v.length;
    });
    normalise(out);
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.parts.map((p) => p.embedder.close?.()));
  }
}
