/**
 * Trial: lens queries embedded at several small rotations, fused by the best score per item
 * (test-time augmentation), against the plain query. Exact search over the hybrid's parts on
 * the food photos; prints R@1 per change (several angles both ways, not only the quality
 * bench's +10°). Not part of `npm run bench`: it decides whether the lens path should do this.
 */
import crypto from 'node:crypto';
import sharp from 'sharp';
import { DescriptorEmbedder } from '../src/adapters/embedders/descriptor';
import { EfficientNetEmbedder } from '../src/adapters/embedders/efficientnet';
import { HYBRID_WEIGHTS } from '../src/adapters/embedders';
import { SharpImageAnalyzer } from '../src/adapters/images/sharp-analyzer';
import type { Embedder, Pixels } from '../src/ports/embedder';
import { foodImages } from './food-images';
import { LENS_CHANGES, rotatedBy } from './lens-changes';
import { Capture } from './capture-embedder';

interface Parts {
  d: Float32Array;
  c: Float32Array;
}

const desc = new DescriptorEmbedder();

async function partsOfPixels(p: Pixels, cnn: Embedder): Promise<Parts> {
  const small = await sharp(p.data, { raw: { width: p.size, height: p.size, channels: 3 } })
    .resize(64, 64, { fit: 'fill' })
    .raw()
    .toBuffer();
  return { d: desc.embedSync({ data: small, size: 64 }), c: await cnn.embed(p) };
}

async function decode(bytes: Buffer, size: number): Promise<Pixels> {
  const capture = new Capture(size);
  await new SharpImageAnalyzer(capture).analyze(bytes);
  return capture.seen[0]!;
}

/** The decoded query turned by `deg` on white; `crop` keeps the centre at the same size. */
async function turned(p: Pixels, deg: number, crop: boolean): Promise<Pixels> {
  const img = sharp(p.data, { raw: { width: p.size, height: p.size, channels: 3 } }).rotate(deg, {
    background: '#ffffff',
  });
  const buf = await img.raw().toBuffer({ resolveWithObject: true });
  const { width, height } = buf.info;
  const out = crop
    ? await sharp(buf.data, { raw: { width, height, channels: 3 } })
        .extract({
          left: Math.floor((width - p.size) / 2),
          top: Math.floor((height - p.size) / 2),
          width: p.size,
          height: p.size,
        })
        .raw()
        .toBuffer()
    : await sharp(buf.data, { raw: { width, height, channels: 3 } })
        .resize(p.size, p.size, { fit: 'fill' })
        .raw()
        .toBuffer();
  return { data: out, size: p.size };
}

const dot = (a: Float32Array, b: Float32Array): number => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

const CHANGES: Record<string, (b: Buffer) => Promise<Buffer>> = {
  mirrored: LENS_CHANGES.mirrored!,
  cropped: LENS_CHANGES.cropped!,
  recompressed: LENS_CHANGES.recompressed!,
  ...Object.fromEntries(
    [-15, -10, -5, 5, 10, 15].map((a) => [`rotated${a > 0 ? '+' : ''}${a}`, rotatedBy(a)]),
  ),
};

async function main(): Promise<void> {
  const images = await foodImages();
  const cnn = await EfficientNetEmbedder.load();
  const size = cnn.inputSize;
  const digest = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
  const photo = images.map((i) => digest(i.bytes));
  const parts: Parts[] = [];
  for (const img of images) parts.push(await partsOfPixels(await decode(img.bytes, size), cnn));
  const w = HYBRID_WEIGHTS.descriptor;
  const mix = (d: number, c: number) =>
    (w * w * d + (1 - w) * (1 - w) * c) / (w * w + (1 - w) * (1 - w));
  const ANGLES = (process.env.TTA_ANGLES ?? '8').split(',').map(Number);
  const variants: Array<{ name: string; turns: Array<[number, boolean]> }> = [
    { name: 'plain', turns: [] },
    ...ANGLES.flatMap((a) => [
      {
        name: `±${a} expand`,
        turns: [[-a, false] as [number, boolean], [a, false] as [number, boolean]],
      },
      {
        name: `±${a} crop`,
        turns: [[-a, true] as [number, boolean], [a, true] as [number, boolean]],
      },
    ]),
  ];
  const hits: Record<string, Record<string, number>> = {};
  for (const [change, apply] of Object.entries(CHANGES)) {
    for (let qi = 0; qi < images.length; qi++) {
      const px = await decode(await apply(images[qi]!.bytes), size);
      const base = await partsOfPixels(px, cnn);
      const extra = new Map<string, Parts>();
      for (const v of variants)
        for (const [deg, crop] of v.turns) {
          const k = `${deg}${crop}`;
          if (!extra.has(k)) extra.set(k, await partsOfPixels(await turned(px, deg, crop), cnn));
        }
      for (const v of variants) {
        const qs = [base, ...v.turns.map(([deg, crop]) => extra.get(`${deg}${crop}`)!)];
        let best = -2;
        let at = -1;
        for (let j = 0; j < parts.length; j++) {
          let s = -2;
          for (const q of qs) s = Math.max(s, mix(dot(q.d, parts[j]!.d), dot(q.c, parts[j]!.c)));
          if (s > best) [best, at] = [s, j];
        }
        (hits[v.name] ??= {})[change] =
          (hits[v.name]![change] ?? 0) + (photo[at] === photo[qi] ? 1 : 0);
      }
    }
    process.stderr.write(`${change} done\n`);
  }
  for (const [v, per] of Object.entries(hits))
    console.log(
      v.padEnd(14),
      Object.entries(per)
        .map(([c, h]) => `${c} ${(h / images.length).toFixed(4)}`)
        .join('  '),
    );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
