/**
 * Trials for "what lifts the food figure further without labels": (A) EfficientNet-Lite2
 * (260 px) in place of Lite0, alone and in the hybrid; (B) PCA whitening of the CNN part fitted
 * without labels (on the set itself, on another set, on one half of the food photos applied to
 * the other). Exact cosine search, leave-one-out, P@10 = share of the top 10 with the query's
 * label, as bench/similarity-quality.ts measures. Neither was adopted (docs/embedders.md).
 * Not part of `npm run bench`; writes bench/results/embedding-trials.json. Parts are cached in
 * .cache/lite2/parts-*.f32 (delete them when the code or a model changes).
 *
 * The Lite2 model is the Lite0 converter with scripts/model/lite2-trial.patch applied:
 *
 *   python3 -m venv .cache/model-venv && .cache/model-venv/bin/pip install -r scripts/model/requirements.txt
 *   mkdir -p .cache/lite2 && patch -o .cache/lite2/convert_efficientnet_lite2.py \
 *     scripts/model/convert_efficientnet_lite0.py scripts/model/lite2-trial.patch
 *   .cache/model-venv/bin/python .cache/lite2/convert_efficientnet_lite2.py --write-sha
 *     (sha256 57752fbd349edea4dac356f5d3aebd6323a6912100d92045d615de1a073900a7)
 *
 *   npm run -s bench:build && node bench/dist/bench/embedding-trials.js
 *
 * Env: TRIAL_LENS=1 also measures lens R@1 (the quality bench's four changes) for both CNNs;
 * TRIAL_LENS_WHITEN=1 lens R@1 of Lite0 with the CNN part centred/projected (food fit);
 * TRIAL_MNIST=0 skips the MNIST set; TRIAL_TIMING_N images per timing round (default 60).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import sharp from 'sharp';
import { DescriptorEmbedder } from '../src/adapters/embedders/descriptor';
import { EfficientNetEmbedder } from '../src/adapters/embedders/efficientnet';
import { SerialSession } from '../src/adapters/embedders/serial-session';
import { normalise } from '../src/adapters/embedders/unit';
import { SharpImageAnalyzer } from '../src/adapters/images/sharp-analyzer';
import type { Embedder, Pixels } from '../src/ports/embedder';
import { foodImages } from './food-images';
import { labelledImages, type LabelledImage } from './labelled-images';
import { mnistImages } from './mnist-images';
import { Capture } from './capture-embedder';
import { machine, writeResult } from './common';
import { LENS_CHANGES } from './lens-changes';

const REPO = path.resolve(__dirname, '..', '..', '..');
const CACHE = path.join(REPO, '.cache', 'lite2');
const LITE2_MODEL = path.join(CACHE, 'efficientnet-lite2.onnx');
const K = 10;
const PER_CLASS = Number(process.env.BENCH_PER_CLASS ?? 40);
const GRID = [0, 0.3, 0.4, 0.45, 0.5, 0.525, 0.55, 0.575, 0.6, 0.7, 1];
const DEFAULT_W = 0.525;

/** Lite2 as the repo's EfficientNetEmbedder runs Lite0: same session settings, input, norm. */
class Lite2Embedder implements Embedder {
  readonly id = 'efficientnet-lite2-trial';
  readonly dimensions = 1280;
  readonly inputSize: number;
  private constructor(private readonly session: SerialSession) {
    this.inputSize = session.inputSize;
  }
  static async load(): Promise<Lite2Embedder> {
    return new Lite2Embedder(await SerialSession.create(fs.readFileSync(LITE2_MODEL)));
  }
  async embed({ data, size }: Pixels): Promise<Float32Array> {
    const plane = size * size;
    const input = new Float32Array(3 * plane);
    for (let i = 0; i < plane; i++)
      for (let c = 0; c < 3; c++) input[c * plane + i] = (data[i * 3 + c]! - 127) / 128;
    const v = await this.session.run(input);
    normalise(v);
    return v;
  }
}

const desc = new DescriptorEmbedder();

async function decode(bytes: Buffer, size: number): Promise<Pixels> {
  const c = new Capture(size);
  await new SharpImageAnalyzer(c).analyze(bytes);
  return c.seen[0]!;
}

/** Descriptor from a 64² resize of the CNN-size decode, as the hybrid does. */
async function descriptorOf(p: Pixels): Promise<Float32Array> {
  const small = await sharp(p.data, { raw: { width: p.size, height: p.size, channels: 3 } })
    .resize(64, 64, { fit: 'fill' })
    .raw()
    .toBuffer();
  return desc.embedSync({ data: small, size: 64 });
}

interface SetParts {
  d: Float32Array[];
  c: Float32Array[];
  /** ms of cnn.embed per image during the pass (noisy: the machine is shared). */
  ms: number[];
}

async function partsFor(
  setName: string,
  images: LabelledImage[],
  cnnName: string,
  cnn: Embedder,
): Promise<SetParts> {
  const key = crypto
    .createHash('sha256')
    .update(images.map((i) => i.id).join(','))
    .update(cnnName)
    .digest('hex')
    .slice(0, 12);
  const file = path.join(CACHE, `parts-${setName}-${cnnName}-${key}.f32`);
  const dd = desc.dimensions;
  const dc = 1280;
  if (fs.existsSync(file)) {
    const buf = fs.readFileSync(file);
    const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    const stride = dd + dc;
    return {
      d: images.map((_, i) => all.slice(i * stride, i * stride + dd)),
      c: images.map((_, i) => all.slice(i * stride + dd, (i + 1) * stride)),
      ms: [],
    };
  }
  const out: SetParts = { d: [], c: [], ms: [] };
  for (const img of images) {
    const px = await decode(img.bytes, cnn.inputSize);
    out.d.push(await descriptorOf(px));
    const t0 = performance.now();
    out.c.push(await cnn.embed(px));
    out.ms.push(performance.now() - t0);
  }
  const all = new Float32Array(images.length * (dd + dc));
  images.forEach((_, i) => {
    all.set(out.d[i]!, i * (dd + dc));
    all.set(out.c[i]!, i * (dd + dc) + dd);
  });
  fs.writeFileSync(file, Buffer.from(all.buffer));
  return out;
}

const dot = (a: Float32Array | Float64Array, b: Float32Array | Float64Array): number => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

/** n × n cosine matrix (rows are unit vectors). */
function gram(vs: Array<Float32Array | Float64Array>): Float64Array {
  const n = vs.length;
  const m = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = i; j < n; j++) m[i * n + j] = m[j * n + i] = dot(vs[i]!, vs[j]!);
  return m;
}

const mix = (w: number, d: number, c: number): number =>
  (w * w * d + (1 - w) * (1 - w) * c) / (w * w + (1 - w) * (1 - w));

const r4 = (x: number) => Math.round(x * 10000) / 10000;

/**
 * P@10, leave-one-out within `subset` (default all), exact; ties keep the lower index first
 * (as the quality bench's stable sort does).
 */
function precision(
  labels: string[],
  D: Float64Array,
  C: Float64Array,
  w: number,
  subset?: number[],
): number {
  const n = labels.length;
  const idx = subset ?? labels.map((_, i) => i);
  let total = 0;
  const topS = new Float64Array(K);
  const topJ = new Int32Array(K);
  for (const q of idx) {
    let filled = 0;
    for (const j of idx) {
      if (j === q) continue;
      const s = mix(w, D[q * n + j]!, C[q * n + j]!);
      // insertion into the sorted top K: a new entry while filling, else one better than the last
      if (filled < K || s > topS[K - 1]!) {
        let p = filled < K ? filled++ : K - 1;
        while (p > 0 && topS[p - 1]! < s) {
          topS[p] = topS[p - 1]!;
          topJ[p] = topJ[p - 1]!;
          p--;
        }
        topS[p] = s;
        topJ[p] = j;
      }
    }
    let hit = 0;
    for (let t = 0; t < K; t++) if (labels[topJ[t]!] === labels[q]) hit++;
    total += hit / K;
  }
  return r4(total / idx.length);
}

function grid(labels: string[], D: Float64Array, C: Float64Array, subset?: number[]) {
  return Object.fromEntries(GRID.map((w) => [w.toFixed(3), precision(labels, D, C, w, subset)]));
}

// ---------------------------------------------------------------------------------------------
// PCA whitening, fitted without labels
// ---------------------------------------------------------------------------------------------

/** Cyclic Jacobi eigen-decomposition of a symmetric n × n matrix (row-major, overwritten). */
function jacobiEigen(a: Float64Array, n: number): { values: Float64Array; vectors: Float64Array } {
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  let norm = 0;
  for (let i = 0; i < n * n; i++) norm += a[i]! * a[i]!;
  for (let sweep = 0; sweep < 60; sweep++) {
    let off = 0;
    for (let p = 0; p < n; p++) for (let q = p + 1; q < n; q++) off += a[p * n + q]! ** 2;
    if (off <= 1e-26 * norm) break;
    for (let p = 0; p < n - 1; p++)
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q]!;
        if (Math.abs(apq) < 1e-300) continue;
        const app = a[p * n + p]!;
        const aqq = a[q * n + q]!;
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        // rows/cols p and q of a (symmetric): update column-wise and mirror
        for (let k = 0; k < n; k++) {
          const akp = a[k * n + p]!;
          const akq = a[k * n + q]!;
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p * n + k]!;
          const aqk = a[q * n + k]!;
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k * n + p]!;
          const vkq = v[k * n + q]!;
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = a[i * n + i]!;
  return { values, vectors: v }; // eigenvector i is column i of v
}

interface Pca {
  mu: Float64Array;
  /** unit principal directions in feature space, by decreasing eigenvalue */
  dirs: Float64Array[];
  /** covariance eigenvalues */
  lambda: number[];
  fitN: number;
}

/** PCA of rows X (n × d, n ≤ d) through the n × n Gram matrix of the centred rows. */
function fitPca(X: Float32Array[]): Pca {
  const n = X.length;
  const d = X[0]!.length;
  const mu = new Float64Array(d);
  for (const x of X) for (let i = 0; i < d; i++) mu[i]! += x[i]! / n;
  const Xc = X.map((x) => Float64Array.from(x, (v, i) => v - mu[i]!));
  const G = gram(Xc);
  const G0 = Float64Array.from(G);
  const { values, vectors } = jacobiEigen(G, n);
  const order = Array.from(values.keys()).sort((a, b) => values[b]! - values[a]!);
  const top = values[order[0]!]!;
  const dirs: Float64Array[] = [];
  const lambda: number[] = [];
  // check: residual of the top eigenpair of the original Gram
  {
    const i0 = order[0]!;
    let res = 0;
    for (let r = 0; r < n; r++) {
      let s = 0;
      for (let c = 0; c < n; c++) s += G0[r * n + c]! * vectors[c * n + i0]!;
      res += (s - values[i0]! * vectors[r * n + i0]!) ** 2;
    }
    if (Math.sqrt(res) > 1e-6 * top) throw new Error(`eigen residual ${Math.sqrt(res)}`);
  }
  for (const i of order) {
    const s = values[i]!;
    if (s <= 1e-9 * top || dirs.length >= n - 1) break;
    const dir = new Float64Array(d);
    for (let r = 0; r < n; r++) {
      const u = vectors[r * n + i]!;
      if (u === 0) continue;
      const xr = Xc[r]!;
      for (let k = 0; k < d; k++) dir[k]! += u * xr[k]!;
    }
    const inv = 1 / Math.sqrt(s);
    for (let k = 0; k < d; k++) dir[k]! *= inv;
    dirs.push(dir);
    lambda.push(s / (n - 1));
  }
  return { mu, dirs, lambda, fitN: n };
}

interface WhiteSpec {
  k: number;
  power: number;
  /** eps added to each eigenvalue: 'tiny' (1e-9) or 'mean' (the mean of the k kept, a shrink) */
  eps: 'tiny' | 'mean';
}

const specName = (s: WhiteSpec) =>
  `k${s.k} p${s.power}${s.power > 0 && s.eps === 'mean' ? ' eps=mean' : ''}`;

function applyPca(p: Pca, X: Float32Array[], spec: WhiteSpec): { out: Float64Array[]; k: number } {
  const k = Math.min(spec.k, p.dirs.length);
  const lam = p.lambda.slice(0, k);
  const eps = spec.eps === 'mean' ? lam.reduce((a, b) => a + b, 0) / k : 1e-9;
  const scale = lam.map((l) => (l + eps) ** -spec.power);
  const out = X.map((x) => {
    const z = new Float64Array(k);
    for (let i = 0; i < k; i++) {
      const dir = p.dirs[i]!;
      let s = 0;
      for (let j = 0; j < x.length; j++) s += dir[j]! * (x[j]! - p.mu[j]!);
      z[i] = s * scale[i]!;
    }
    let nn = 0;
    for (let i = 0; i < k; i++) nn += z[i]! * z[i]!;
    const inv = nn > 0 ? 1 / Math.sqrt(nn) : 0;
    for (let i = 0; i < k; i++) z[i]! *= inv;
    return z;
  });
  return { out, k };
}

const SPECS: WhiteSpec[] = [128, 256, 512].flatMap((k) => [
  { k, power: 0, eps: 'tiny' as const }, // PCA projection + centring only (control)
  { k, power: 0.25, eps: 'tiny' as const },
  { k, power: 0.5, eps: 'tiny' as const },
  { k, power: 0.5, eps: 'mean' as const },
]);

/** Centring only (all dimensions kept): the control for "is it the mean or the whitening". */
function centred(X: Float32Array[], mu: Float64Array): Float64Array[] {
  return X.map((x) => {
    const z = Float64Array.from(x, (v, i) => v - mu[i]!);
    const n = Math.sqrt(dot(z, z));
    return z.map((v) => v / n);
  });
}

// ---------------------------------------------------------------------------------------------
// lens R@1 (optional), as bench/similarity-quality.ts: each original at its best over views
// ---------------------------------------------------------------------------------------------

type Transform = (c: Float32Array[]) => Array<Float32Array | Float64Array>;

async function lens(
  images: LabelledImage[],
  parts: SetParts,
  cnn: Embedder,
  ws: number[],
  transforms: Record<string, Transform> = { raw: (c) => c },
): Promise<Record<string, Record<string, Record<string, number>>>> {
  const digest = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
  const photo = images.map((i) => digest(i.bytes));
  const tNames = Object.keys(transforms);
  const db = Object.fromEntries(tNames.map((t) => [t, transforms[t]!(parts.c)]));
  const out: Record<string, Record<string, Record<string, number>>> = {};
  for (const [change, apply] of Object.entries(LENS_CHANGES)) {
    const hits = tNames.map(() => ws.map(() => 0));
    for (let qi = 0; qi < images.length; qi++) {
      const cap = new Capture(cnn.inputSize);
      await new SharpImageAnalyzer(cap).queryVectors(await apply(images[qi]!.bytes));
      const views: Array<{ d: Float32Array; c: Float32Array }> = [];
      for (const p of cap.seen) views.push({ d: await descriptorOf(p), c: await cnn.embed(p) });
      const dq = views.map((v) => parts.d.map((x) => dot(v.d, x)));
      tNames.forEach((t, ti) => {
        const qc = transforms[t]!(views.map((v) => v.c));
        const cq = qc.map((q) => db[t]!.map((x) => dot(q, x)));
        ws.forEach((w, wi) => {
          let best = -2;
          let at = -1;
          for (let j = 0; j < images.length; j++) {
            let s = -2;
            for (let v = 0; v < views.length; v++) s = Math.max(s, mix(w, dq[v]![j]!, cq[v]![j]!));
            if (s > best) [best, at] = [s, j];
          }
          if (photo[at] === photo[qi]) hits[ti]![wi]!++;
        });
      });
    }
    tNames.forEach((t, ti) => {
      (out[t] ??= {})[change] = Object.fromEntries(
        ws.map((w, wi) => [w.toFixed(3), r4(hits[ti]![wi]! / images.length)]),
      );
      console.log(`  lens ${cnn.id} ${t} ${change}:`, JSON.stringify(out[t]![change]));
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return {
    n: s.length,
    median: +q(0.5).toFixed(2),
    p90: +q(0.9).toFixed(2),
    mean: +(s.reduce((a, b) => a + b, 0) / s.length).toFixed(2),
    min: +s[0]!.toFixed(2),
  };
}

/** Interleaved timing of cnn.embed (tensor + run + normalise) on the same food decodes. */
async function timing(images: LabelledImage[], cnns: Record<string, Embedder>) {
  const n = Number(process.env.TRIAL_TIMING_N ?? 60);
  const px: Record<string, Pixels[]> = {};
  for (const [name, cnn] of Object.entries(cnns)) {
    px[name] = [];
    for (const img of images.slice(0, n)) px[name]!.push(await decode(img.bytes, cnn.inputSize));
    for (const p of px[name]!.slice(0, 5)) await cnn.embed(p); // warm-up
  }
  const ms: Record<string, number[]> = Object.fromEntries(Object.keys(cnns).map((k) => [k, []]));
  for (let round = 0; round < 3; round++)
    for (const [name, cnn] of Object.entries(cnns))
      for (const p of px[name]!) {
        const t0 = performance.now();
        await cnn.embed(p);
        ms[name]!.push(performance.now() - t0);
      }
  return Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, stats(v)]));
}

async function main(): Promise<void> {
  fs.mkdirSync(CACHE, { recursive: true });
  const t0 = Date.now();
  const result: Record<string, unknown> = {
    date: new Date().toISOString(),
    load_average_at_start: os.loadavg().map((x) => +x.toFixed(2)),
    cores: os.availableParallelism(),
    lite2_model_sha256: crypto
      .createHash('sha256')
      .update(fs.readFileSync(LITE2_MODEL))
      .digest('hex'),
  };
  const cnns: Record<string, Embedder> = {
    lite0: await EfficientNetEmbedder.load(),
    lite2: await Lite2Embedder.load(),
  };
  const sets: Record<string, LabelledImage[]> = {
    food: await foodImages(),
    shapes: await labelledImages(PER_CLASS),
  };
  if (process.env.TRIAL_MNIST !== '0') sets.mnist = await mnistImages(PER_CLASS);
  const labels = Object.fromEntries(
    Object.entries(sets).map(([k, v]) => [k, v.map((i) => i.label)]),
  );

  // parts and similarity matrices
  const parts: Record<string, Record<string, SetParts>> = {};
  const mats: Record<string, Record<string, { D: Float64Array; C: Float64Array }>> = {};
  const passMs: Record<string, unknown> = {};
  for (const [setName, images] of Object.entries(sets))
    for (const [cnnName, cnn] of Object.entries(cnns)) {
      const p = await partsFor(setName, images, cnnName, cnn);
      (parts[setName] ??= {})[cnnName] = p;
      (mats[setName] ??= {})[cnnName] = { D: gram(p.d), C: gram(p.c) };
      if (p.ms.length) passMs[`${setName}/${cnnName}`] = stats(p.ms);
      console.log(`parts ${setName}/${cnnName} ready (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    }
  result.embed_pass_ms = passMs;

  // Trial A: P@10 by descriptor share (0 = CNN alone, 1 = descriptor alone)
  const trialA: Record<string, Record<string, Record<string, number>>> = {};
  for (const setName of Object.keys(sets))
    for (const cnnName of Object.keys(cnns)) {
      const { D, C } = mats[setName]![cnnName]!;
      (trialA[setName] ??= {})[cnnName] = grid(labels[setName]!, D, C);
      console.log(`A ${setName} ${cnnName} P@10 by descriptor share:`, trialA[setName]![cnnName]);
    }
  result.trialA_p_at_10_by_descriptor_share = trialA;
  const timed = await timing(sets.food!, cnns);
  console.log('A ms per image (cnn.embed, interleaved, food decodes):', timed);
  result.trialA_ms_per_image = timed;
  result.load_average_after_timing = os.loadavg().map((x) => +x.toFixed(2));
  writeOut(result);

  // Trial B: whitening of the CNN part
  const trialB: Record<string, unknown> = {};
  const hybrid = (
    lab: string[],
    D: Float64Array,
    C: Float64Array,
    subset?: number[],
  ): { cnn: number; w525: number; best: number; bestW: number } => {
    const g = GRID.map((w) => [w, precision(lab, D, C, w, subset)] as const);
    const best = g.filter(([w]) => w < 1).reduce((a, b) => (b[1] > a[1] ? b : a));
    return {
      cnn: g.find(([w]) => w === 0)![1],
      w525: g.find(([w]) => w === DEFAULT_W)![1],
      best: best[1],
      bestW: best[0],
    };
  };
  // food halves, by photo (the same photo file never in both halves)
  const food = sets.food!;
  const byPhoto = new Map<string, number[]>();
  food.forEach((img, i) => {
    const h = crypto.createHash('sha256').update(img.bytes).digest('hex');
    byPhoto.set(h, [...(byPhoto.get(h) ?? []), i]);
  });
  const halfA: number[] = [];
  const halfB: number[] = [];
  [...byPhoto.values()].forEach((g, gi) => (gi % 2 ? halfB : halfA).push(...g));
  halfA.sort((a, b) => a - b);
  halfB.sort((a, b) => a - b);
  console.log(`food halves: A ${halfA.length}, B ${halfB.length} images`);

  for (const cnnName of Object.keys(cnns)) {
    const rows: Array<Record<string, unknown>> = [];
    const foodC = parts.food![cnnName]!.c;
    const foodD = mats.food![cnnName]!.D;
    const shapesC = parts.shapes![cnnName]!.c;
    const shapesD = mats.shapes![cnnName]!.D;
    const tFit = Date.now();
    const fits = {
      food: fitPca(foodC),
      shapes: fitPca(shapesC),
      foodA: fitPca(halfA.map((i) => foodC[i]!)),
      foodB: fitPca(halfB.map((i) => foodC[i]!)),
    };
    console.log(`B ${cnnName}: 4 PCA fits in ${((Date.now() - tFit) / 1000).toFixed(1)} s`);
    const base = {
      food: hybrid(labels.food!, foodD, mats.food![cnnName]!.C),
      shapes: hybrid(labels.shapes!, shapesD, mats.shapes![cnnName]!.C),
      halfB: hybrid(labels.food!, foodD, mats.food![cnnName]!.C, halfB),
      halfA: hybrid(labels.food!, foodD, mats.food![cnnName]!.C, halfA),
    };
    rows.push({ spec: 'none (baseline)', ...flat(base) });
    // centring only, fitted on the food itself / on shapes
    rows.push({
      spec: 'centre only',
      ...flat({
        food: hybrid(labels.food!, foodD, gram(centred(foodC, fits.food.mu))),
        foodFromShapes: hybrid(labels.food!, foodD, gram(centred(foodC, fits.shapes.mu))),
        shapes: hybrid(labels.shapes!, shapesD, gram(centred(shapesC, fits.shapes.mu))),
        halfB_fitA: hybrid(labels.food!, foodD, gram(centred(foodC, fits.foodA.mu)), halfB),
        halfA_fitB: hybrid(labels.food!, foodD, gram(centred(foodC, fits.foodB.mu)), halfA),
        halfB_fitB: hybrid(labels.food!, foodD, gram(centred(foodC, fits.foodB.mu)), halfB),
        halfA_fitA: hybrid(labels.food!, foodD, gram(centred(foodC, fits.foodA.mu)), halfA),
      }),
    });
    for (const spec of SPECS) {
      const wf = applyPca(fits.food, foodC, spec);
      const ws = applyPca(fits.shapes, foodC, spec);
      const wsh = applyPca(fits.shapes, shapesC, spec);
      const wfsh = applyPca(fits.food, shapesC, spec);
      // half transfer: fit on A, apply to all food, evaluate within B (and B -> A)
      const aToAll = gram(applyPca(fits.foodA, foodC, spec).out);
      const bToAll = gram(applyPca(fits.foodB, foodC, spec).out);
      const row = {
        spec: specName(spec),
        k_used: {
          food: wf.k,
          shapes: wsh.k,
          halfA: Math.min(spec.k, fits.foodA.dirs.length),
          halfB: Math.min(spec.k, fits.foodB.dirs.length),
        },
        ...flat({
          food: hybrid(labels.food!, foodD, gram(wf.out)),
          foodFromShapes: hybrid(labels.food!, foodD, gram(ws.out)),
          halfB_fitA: hybrid(labels.food!, foodD, aToAll, halfB),
          halfA_fitB: hybrid(labels.food!, foodD, bToAll, halfA),
          halfB_fitB: hybrid(labels.food!, foodD, bToAll, halfB),
          halfA_fitA: hybrid(labels.food!, foodD, aToAll, halfA),
          shapes: hybrid(labels.shapes!, shapesD, gram(wsh.out)),
          shapesFromFood: hybrid(labels.shapes!, shapesD, gram(wfsh.out)),
        }),
      };
      rows.push(row);
      console.log(`B ${cnnName}`, JSON.stringify(row));
    }
    trialB[cnnName] = rows;
    result.trialB = trialB;
    writeOut(result);
  }

  // Under the default's goals: one descriptor share for every set; the best food P@10 with
  // shapes >= 0.93 at that share. Whitening either per dataset (each set fitted on itself) or
  // one global fit (fitted on food, or on shapes) applied to every set.
  const FINE = Array.from({ length: 21 }, (_, i) => +(0.3 + i * 0.025).toFixed(3));
  const CSPECS: Array<WhiteSpec | 'raw' | 'centre'> = [
    'raw',
    'centre',
    { k: 128, power: 0, eps: 'tiny' },
    { k: 256, power: 0, eps: 'tiny' },
    { k: 128, power: 0.25, eps: 'tiny' },
    { k: 256, power: 0.25, eps: 'tiny' },
    { k: 512, power: 0.25, eps: 'tiny' },
    { k: 128, power: 0.5, eps: 'mean' },
    { k: 256, power: 0.5, eps: 'tiny' },
    { k: 512, power: 0.5, eps: 'tiny' },
  ];
  const setNames = Object.keys(sets);
  const constrained: Array<Record<string, unknown>> = [];
  for (const cnnName of Object.keys(cnns)) {
    const fitsBy = Object.fromEntries(setNames.map((s) => [s, fitPca(parts[s]![cnnName]!.c)]));
    const modes: Array<[string, (s: string) => string]> = [
      ['per-dataset', (s) => s],
      ['global food fit', () => 'food'],
      ['global shapes fit', () => 'shapes'],
    ];
    for (const spec of CSPECS)
      for (const [mode, fitOf] of spec === 'raw' ? modes.slice(0, 1) : modes) {
        const per: Record<string, number[]> = {};
        for (const s of setNames) {
          const X = parts[s]![cnnName]!.c;
          const fit = fitsBy[fitOf(s)]!;
          const C =
            spec === 'raw'
              ? mats[s]![cnnName]!.C
              : spec === 'centre'
                ? gram(centred(X, fit.mu))
                : gram(applyPca(fit, X, spec).out);
          per[s] = FINE.map((w) => precision(labels[s]!, mats[s]![cnnName]!.D, C, w));
        }
        const i525 = FINE.indexOf(DEFAULT_W);
        let bestI = -1;
        FINE.forEach((_, i) => {
          if (per.shapes![i]! >= 0.93 && (bestI < 0 || per.food![i]! > per.food![bestI]!))
            bestI = i;
        });
        const row = {
          cnn: cnnName,
          spec: typeof spec === 'string' ? spec : specName(spec),
          mode: spec === 'raw' ? '-' : mode,
          w525: Object.fromEntries(setNames.map((s) => [s, per[s]![i525]])),
          feasible:
            bestI < 0
              ? null
              : { w: FINE[bestI], ...Object.fromEntries(setNames.map((s) => [s, per[s]![bestI]])) },
          by_w: Object.fromEntries(
            FINE.map((w, i) => [w.toFixed(3), setNames.map((s) => per[s]![i]).join('/')]),
          ),
        };
        constrained.push(row);
        console.log(
          `C ${cnnName} ${row.spec} ${row.mode}: w.525 ${JSON.stringify(row.w525)} best-with-shapes>=.93 ${JSON.stringify(row.feasible)}`,
        );
      }
  }
  result.constrained = constrained;
  writeOut(result);

  if (process.env.TRIAL_LENS_WHITEN === '1') {
    // lens R@1 with the CNN part centred / projected by a fit on the food photos (Lite0)
    const fit = fitPca(parts.food!.lite0!.c);
    const transforms: Record<string, Transform> = {
      raw: (c) => c,
      'centre (food fit)': (c) => centred(c, fit.mu),
      'k128 p0 (food fit)': (c) => applyPca(fit, c, { k: 128, power: 0, eps: 'tiny' }).out,
      'k256 p0 (food fit)': (c) => applyPca(fit, c, { k: 256, power: 0, eps: 'tiny' }).out,
    };
    result.lens_lite0_whitened = await lens(
      sets.food!,
      parts.food!.lite0!,
      cnns.lite0!,
      [0.5, 0.525, 0.55],
      transforms,
    );
    writeOut(result);
  }

  if (process.env.TRIAL_LENS === '1') {
    const ws = [0, 0.4, 0.45, 0.5, 0.525, 0.55, 0.6];
    const lensOut: Record<string, unknown> = {};
    for (const [cnnName, cnn] of Object.entries(cnns))
      lensOut[cnnName] = await lens(sets.food!, parts.food![cnnName]!, cnn, ws);
    result.lens_r_at_1_by_descriptor_share = lensOut;
    writeOut(result);
  }
  console.log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

/** { food: {cnn, w525, best, bestW}, … } as flat columns. */
function flat(o: Record<string, { cnn: number; w525: number; best: number; bestW: number }>) {
  return Object.fromEntries(
    Object.entries(o).flatMap(([k, v]) => [
      [`${k}.cnn`, v.cnn],
      [`${k}.w525`, v.w525],
      [`${k}.best`, `${v.best}@${v.bestW}`],
    ]),
  );
}

function writeOut(result: Record<string, unknown>): void {
  writeResult('embedding-trials', { benchmark: 'embedding-trials', machine: machine(), ...result });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
