/**
 * A large set of the default embedder's vectors of real images, for kNN recall and latency at
 * scale (issue 17: recall on real vectors, not only on uniform random ones, which have no
 * cluster structure). Offline, the real images at hand are 542 food photos, 10,000 MNIST digits
 * and the generated shape × colour drawings; to reach 100,000 the food photos are also taken
 * as a shopper's camera and a catalogue would vary them (a crop of 45–100 % of the area, a
 * mirror, a turn of up to ±20°, light, saturation and hue shifts, a little blur), the digits
 * turned and thickened, and the drawings drawn again with other seeds. Each variant goes
 * through the service's own decode and embedder (SharpImageAnalyzer), as a pushed image would.
 *
 * The vectors are cached in .cache/bench/real-vectors-<embedder>.f32 (float32, one row per
 * image, appended as they are made, so an interrupted run goes on where it stopped) with the
 * source of each row in a .labels file beside it.
 *
 *   npm run -s bench:build && node bench/dist/real-vectors.js   (REAL_ITEMS, default 100000)
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import {
  HYBRID_SHARES,
  createEmbedder,
  hybridWeights,
} from 'visual-search-service/dist/adapters/embedders';
import { DESCRIPTOR_BLOCKS } from 'visual-search-service/dist/adapters/embedders/descriptor';
import { normalise } from 'visual-search-service/dist/adapters/embedders/unit';
import { SharpImageAnalyzer } from 'visual-search-service/dist/adapters/images/sharp-analyzer';
import { rng } from './common';
import { foodImages } from './food-images';
import { labelledImages, type LabelledImage } from './labelled-images';
import { mnistImages } from './mnist-images';

const CACHE = path.join(__dirname, '../../.cache/bench');

/** Shares of the set: food photo variants, digit variants, drawings (the rest). */
const FOOD_SHARE = 0.35;
const DIGIT_SHARE = 0.2;

export interface RealVectors {
  embedder: string;
  dims: number;
  /** n × dims, row-major */
  data: Float32Array;
  labels: string[];
}

const files = (embedder: string) => ({
  vectors: path.join(CACHE, `real-vectors-${embedder}.f32`),
  labels: path.join(CACHE, `real-vectors-${embedder}.labels`),
});

/**
 * The cache of an earlier default (`hybrid-d52.5e47.5-v1`): the same decode and the same two
 * parts, only mixed by other shares, so its rows give the current mix without embedding again.
 */
const EARLIER = 'hybrid-d52.5e47.5-v1';

/**
 * Each row of `from` made again with the current shares: every block of the row taken back to
 * unit length and given its share. Written beside, then renamed, so a reader never sees half.
 */
function remix(from: string, to: string, dims: number): void {
  const f = files(from);
  const t = files(to);
  const w = hybridWeights(HYBRID_SHARES);
  const blocks: Array<[number, number, number]> = [
    ...Object.entries(DESCRIPTOR_BLOCKS).map(([b, [a, z]]): [number, number, number] => [
      a,
      z,
      w.descriptor[b as keyof typeof w.descriptor],
    ]),
    [140, dims, w.parts.efficientnet],
  ];
  const buf = fs.readFileSync(f.vectors);
  const rows = Math.floor(buf.length / (4 * dims));
  const all = new Float32Array(buf.buffer, buf.byteOffset, rows * dims);
  const out = new Float32Array(rows * dims);
  for (let r = 0; r < rows; r++) {
    const row = out.subarray(r * dims, (r + 1) * dims);
    row.set(all.subarray(r * dims, (r + 1) * dims));
    // a block's length is the square root of its share once the whole row is unit length
    for (const [a, z, weight] of blocks) normalise(row, a, z, weight);
    normalise(row);
  }
  fs.writeFileSync(`${t.vectors}.part`, Buffer.from(out.buffer));
  fs.copyFileSync(f.labels, `${t.labels}.part`);
  fs.renameSync(`${t.labels}.part`, t.labels);
  fs.renameSync(`${t.vectors}.part`, t.vectors);
}

/** The first `n` cached vectors of the default embedder; throws when fewer are cached. */
export async function loadRealVectors(n: number): Promise<RealVectors> {
  const embedder = await createEmbedder('hybrid');
  const f = files(embedder.id);
  const dims = embedder.dimensions;
  const rows = (id: string) =>
    fs.existsSync(files(id).vectors) ? fs.statSync(files(id).vectors).size / (4 * dims) : 0;
  if (rows(embedder.id) < n && rows(EARLIER) >= n) remix(EARLIER, embedder.id, dims);
  const have = rows(embedder.id);
  if (have < n)
    throw new Error(
      `${have} real vectors cached, ${n} asked: run node bench/dist/real-vectors.js first`,
    );
  const buf = fs.readFileSync(f.vectors);
  const data = new Float32Array(buf.buffer, buf.byteOffset, n * dims).slice();
  const labels = fs.readFileSync(f.labels, 'utf8').split('\n').slice(0, n);
  return { embedder: embedder.id, dims, data, labels };
}

/** A food photo as a shopper or another catalogue might have it. */
async function variant(img: LabelledImage, r: () => number): Promise<Buffer> {
  const meta = await sharp(img.bytes).metadata();
  const w = meta.width!;
  const h = meta.height!;
  const area = 0.45 + 0.55 * r();
  const aspect = 0.8 + 0.4 * r();
  const cw = Math.max(16, Math.min(w, Math.round(Math.sqrt(area * aspect) * w)));
  const ch = Math.max(16, Math.min(h, Math.round(Math.sqrt(area / aspect) * h)));
  let p = sharp(img.bytes).extract({
    left: Math.floor(r() * (w - cw + 1)),
    top: Math.floor(r() * (h - ch + 1)),
    width: cw,
    height: ch,
  });
  if (r() < 0.5) p = p.flop();
  const out = await p.jpeg({ quality: 95 }).toBuffer();
  let q = sharp(out)
    .rotate((r() - 0.5) * 40, { background: '#ffffff' })
    .modulate({
      brightness: 0.75 + 0.5 * r(),
      saturation: 0.7 + 0.6 * r(),
      hue: Math.round(360 + (r() - 0.5) * 30) % 360,
    });
  if (r() < 0.3) q = q.blur(0.3 + r() * 1.5);
  return q.jpeg({ quality: 60 + Math.floor(r() * 35) }).toBuffer();
}

/** A digit turned a little and drawn thinner or thicker. */
async function digitVariant(img: LabelledImage, r: () => number): Promise<Buffer> {
  let p = sharp(img.bytes).rotate((r() - 0.5) * 30, { background: '#000000' });
  p = r() < 0.5 ? p.dilate(1) : p.erode(1);
  return p.png().toBuffer();
}

async function main(): Promise<void> {
  const total = Number(process.env.REAL_ITEMS ?? 100_000);
  const embedder = await createEmbedder('hybrid');
  const analyzer = new SharpImageAnalyzer(embedder);
  const f = files(embedder.id);
  fs.mkdirSync(CACHE, { recursive: true });
  const rowBytes = 4 * embedder.dimensions;
  // a row cut short by an interruption is dropped, and so is its label
  let have = fs.existsSync(f.vectors) ? Math.floor(fs.statSync(f.vectors).size / rowBytes) : 0;
  const labels = fs.existsSync(f.labels)
    ? fs.readFileSync(f.labels, 'utf8').split('\n').filter(Boolean).slice(0, have)
    : [];
  have = Math.min(have, labels.length);
  fs.closeSync(fs.openSync(f.vectors, 'a'));
  fs.truncateSync(f.vectors, have * rowBytes);
  fs.writeFileSync(f.labels, labels.map((l) => `${l}\n`).join(''));
  const out = fs.openSync(f.vectors, 'a');
  const labelOut = fs.openSync(f.labels, 'a');

  const food = await foodImages();
  // every digit class has at least 860 images in the package
  const digits = await mnistImages(860);
  const foodN = Math.round(total * FOOD_SHARE);
  const digitN = Math.round(total * DIGIT_SHARE);
  /** Image number i of the whole set, the same for every run (so a resumed run continues it). */
  async function image(i: number): Promise<{ bytes: Buffer; label: string }> {
    const r = rng(1_000_003 + i);
    if (i < foodN) {
      const src = food[i % food.length]!;
      return {
        bytes: i < food.length ? Buffer.from(src.bytes) : await variant(src, r),
        label: src.label,
      };
    }
    if (i < foodN + digitN) {
      const k = i - foodN;
      const src = digits[k % digits.length]!;
      return {
        bytes: k < digits.length ? Buffer.from(src.bytes) : await digitVariant(src, r),
        label: src.label,
      };
    }
    // drawings come 100 at a time (10 per class) from one seed
    const k = i - foodN - digitN;
    const batch = drawings.get(Math.floor(k / 100)) ?? (await drawBatch(Math.floor(k / 100)));
    const img = batch[k % 100]!;
    return { bytes: Buffer.from(img.bytes), label: img.label };
  }
  const drawings = new Map<number, LabelledImage[]>();
  async function drawBatch(b: number): Promise<LabelledImage[]> {
    drawings.clear();
    const batch = await labelledImages(10, 7000 + b);
    drawings.set(b, batch);
    return batch;
  }

  const started = Date.now();
  for (let i = have; i < total; i++) {
    const { bytes, label } = await image(i);
    const { vector } = await analyzer.analyze(bytes);
    fs.writeSync(out, Buffer.from(Float32Array.from(vector).buffer));
    fs.writeSync(labelOut, `${label}\n`);
    if (i % 1000 === 0 || i === total - 1) {
      const rate = (i + 1 - have) / ((Date.now() - started) / 1000);
      console.log(`${i + 1}/${total} vectors (${rate.toFixed(1)}/s)`);
    }
  }
  fs.closeSync(out);
  fs.closeSync(labelOut);
  console.log(`${total} real vectors of ${embedder.id} in ${f.vectors}`);
}

if (require.main === module)
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
