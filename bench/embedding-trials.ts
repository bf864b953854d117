/**
 * Trials for "what lifts the food figure further without labels" and for smaller vectors:
 * (A) EfficientNet-Lite2 (260 px) in place of Lite0, alone and in the hybrid; (B) PCA whitening
 * of the CNN part fitted without labels (on the set itself, on another set, on one half of the
 * food photos applied to the other); (C) each indexed image as the mean of itself and its mirror
 * image; (D) as the mean of itself and 80 % crops (centre, and the four corners), cut from a
 * decode at 280 px so a crop reaches the model at its own resolution — C and D averaging the CNN
 * part, the descriptor part or both, with ms per indexed image and lens R@1 against the stored
 * means; (E) the default's stored vectors smaller (float16, int8, PCA to 512/256/128 fitted
 * without labels on other sets, on the set itself, on one food half for the other), the query in
 * float32, and the embedded engine's exact scan over such rows. Exact cosine search,
 * leave-one-out, P@10 = share of the top 10 with the query's label, as
 * bench/similarity-quality.ts measures. None was adopted (docs/embedders.md). Not part of
 * `npm run bench`; results are merged into bench/results/embedding-trials.json (a run keeps the
 * other trials' keys). Parts are cached in .cache/lite2/parts-*.f32 (A, B) and
 * .cache/embedding-trials/views-*.f32 (C–E; keyed by the model's sha256): delete them when the
 * code changes.
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
 * Env: TRIALS which to run, `AB` (default; A and B share their parts and need the Lite2 model)
 * or any of `C`, `D`, `E` (Lite0 only), e.g. TRIALS=CDE; TRIAL_LENS=1 also measures lens R@1
 * (the quality bench's four changes) for both CNNs in A, TRIAL_LENS=0 skips it in C–E (on by
 * default there: an index-time change must keep the lens goals); TRIAL_LENS_WHITEN=1 lens R@1 of
 * Lite0 with the CNN part centred/projected (food fit); TRIAL_MNIST=0 skips the MNIST set;
 * TRIAL_TIMING_N images per timing round (default 60); TRIAL_SCAN_ROWS rows of E's scan (20000).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import sharp from 'sharp';
import { DescriptorEmbedder } from '../src/adapters/embedders/descriptor';
import { EFFICIENTNET_SHA256, EfficientNetEmbedder } from '../src/adapters/embedders/efficientnet';
import { SerialSession } from '../src/adapters/embedders/serial-session';
import { normalise } from '../src/adapters/embedders/unit';
import { SharpImageAnalyzer } from '../src/adapters/images/sharp-analyzer';
import type { Embedder, Pixels } from '../src/ports/embedder';
import { foodImages } from './food-images';
import { labelledImages, type LabelledImage } from './labelled-images';
import { mnistImages } from './mnist-images';
import { Capture } from './capture-embedder';
import { RESULTS_DIR, machine, writeResult } from './common';
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

/**
 * Householder tridiagonalisation and implicit QL (JAMA's tred2/tql2) of a symmetric n × n
 * matrix: the same decomposition as jacobiEigen, an order of magnitude faster at n ≈ 1,000,
 * where the Jacobi sweeps took minutes per fit.
 */
function householderEigen(
  a: Float64Array,
  n: number,
): { values: Float64Array; vectors: Float64Array } {
  const V = Float64Array.from(a);
  const d = new Float64Array(n);
  const e = new Float64Array(n);
  const at = (i: number, j: number) => i * n + j;
  for (let j = 0; j < n; j++) d[j] = V[at(n - 1, j)]!;
  for (let i = n - 1; i > 0; i--) {
    let scale = 0;
    let h = 0;
    for (let k = 0; k < i; k++) scale += Math.abs(d[k]!);
    if (scale === 0) {
      e[i] = d[i - 1]!;
      for (let j = 0; j < i; j++) {
        d[j] = V[at(i - 1, j)]!;
        V[at(i, j)] = 0;
        V[at(j, i)] = 0;
      }
    } else {
      for (let k = 0; k < i; k++) {
        d[k]! /= scale;
        h += d[k]! * d[k]!;
      }
      let f = d[i - 1]!;
      let g = Math.sqrt(h);
      if (f > 0) g = -g;
      e[i] = scale * g;
      h -= f * g;
      d[i - 1] = f - g;
      for (let j = 0; j < i; j++) e[j] = 0;
      for (let j = 0; j < i; j++) {
        f = d[j]!;
        V[at(j, i)] = f;
        g = e[j]! + V[at(j, j)]! * f;
        for (let k = j + 1; k <= i - 1; k++) {
          g += V[at(k, j)]! * d[k]!;
          e[k]! += V[at(k, j)]! * f;
        }
        e[j] = g;
      }
      f = 0;
      for (let j = 0; j < i; j++) {
        e[j]! /= h;
        f += e[j]! * d[j]!;
      }
      const hh = f / (h + h);
      for (let j = 0; j < i; j++) e[j]! -= hh * d[j]!;
      for (let j = 0; j < i; j++) {
        f = d[j]!;
        g = e[j]!;
        for (let k = j; k <= i - 1; k++) V[at(k, j)]! -= f * e[k]! + g * d[k]!;
        d[j] = V[at(i - 1, j)]!;
        V[at(i, j)] = 0;
      }
    }
    d[i] = h;
  }
  for (let i = 0; i < n - 1; i++) {
    V[at(n - 1, i)] = V[at(i, i)]!;
    V[at(i, i)] = 1;
    const h = d[i + 1]!;
    if (h !== 0) {
      for (let k = 0; k <= i; k++) d[k] = V[at(k, i + 1)]! / h;
      for (let j = 0; j <= i; j++) {
        let g = 0;
        for (let k = 0; k <= i; k++) g += V[at(k, i + 1)]! * V[at(k, j)]!;
        for (let k = 0; k <= i; k++) V[at(k, j)]! -= g * d[k]!;
      }
    }
    for (let k = 0; k <= i; k++) V[at(k, i + 1)] = 0;
  }
  for (let j = 0; j < n; j++) {
    d[j] = V[at(n - 1, j)]!;
    V[at(n - 1, j)] = 0;
  }
  V[at(n - 1, n - 1)] = 1;
  e[0] = 0;
  // tql2
  for (let i = 1; i < n; i++) e[i - 1] = e[i]!;
  e[n - 1] = 0;
  let f = 0;
  let tst1 = 0;
  const eps = 2 ** -52;
  for (let l = 0; l < n; l++) {
    tst1 = Math.max(tst1, Math.abs(d[l]!) + Math.abs(e[l]!));
    let m = l;
    while (m < n && Math.abs(e[m]!) > eps * tst1) m++;
    if (m > l) {
      do {
        let g = d[l]!;
        let p = (d[l + 1]! - g) / (2 * e[l]!);
        let r = Math.hypot(p, 1);
        if (p < 0) r = -r;
        d[l] = e[l]! / (p + r);
        d[l + 1] = e[l]! * (p + r);
        const dl1 = d[l + 1]!;
        let h = g - d[l]!;
        for (let i = l + 2; i < n; i++) d[i]! -= h;
        f += h;
        p = d[m]!;
        let c = 1;
        let c2 = c;
        let c3 = c;
        const el1 = e[l + 1]!;
        let s = 0;
        let s2 = 0;
        for (let i = m - 1; i >= l; i--) {
          c3 = c2;
          c2 = c;
          s2 = s;
          g = c * e[i]!;
          h = c * p;
          r = Math.hypot(p, e[i]!);
          e[i + 1] = s * r;
          s = e[i]! / r;
          c = p / r;
          p = c * d[i]! - s * g;
          d[i + 1] = h + s * (c * g + s * d[i]!);
          for (let k = 0; k < n; k++) {
            h = V[at(k, i + 1)]!;
            V[at(k, i + 1)] = s * V[at(k, i)]! + c * h;
            V[at(k, i)] = c * V[at(k, i)]! - s * h;
          }
        }
        p = (-s * s2 * c3 * el1 * e[l]!) / dl1;
        e[l] = s * p;
        d[l] = c * p;
      } while (Math.abs(e[l]!) > eps * tst1);
    }
    d[l] = d[l]! + f;
    e[l] = 0;
  }
  return { values: d, vectors: V }; // eigenvector i is column i of V, as jacobiEigen's
}

interface Pca {
  mu: Float64Array;
  /** unit principal directions in feature space, by decreasing eigenvalue */
  dirs: Float64Array[];
  /** covariance eigenvalues */
  lambda: number[];
  fitN: number;
}

/**
 * PCA of rows X (n × d, n ≤ d) through the n × n Gram matrix of the centred rows; uncentred
 * (`centre: false`), the directions that keep the rows' own dot products best.
 */
function fitPca(
  X: Float32Array[],
  { centre = true, eigen = jacobiEigen }: { centre?: boolean; eigen?: typeof jacobiEigen } = {},
): Pca {
  const n = X.length;
  const d = X[0]!.length;
  const mu = new Float64Array(d);
  if (centre) for (const x of X) for (let i = 0; i < d; i++) mu[i]! += x[i]! / n;
  const Xc = X.map((x) => Float64Array.from(x, (v, i) => v - mu[i]!));
  const G = gram(Xc);
  const G0 = Float64Array.from(G);
  const { values, vectors } = eigen(G, n);
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

interface ViewParts {
  d: Float32Array;
  c: Float32Array;
}

/**
 * What a lens query is searched against: for one query view, every indexed item's score at a
 * descriptor share (the dot products are taken once per view, the shares only mix them).
 */
interface LensDb {
  ws: number[];
  score(view: ViewParts): (w: number) => Float64Array;
}

/** Indexed items as their two parts; `query` maps a query view's CNN part as the items' were. */
function partsDb(
  d: Float32Array[],
  c: Array<Float32Array | Float64Array>,
  ws: number[],
  query: Transform = (x) => x,
): LensDb {
  return {
    ws,
    score(v) {
      const dq = d.map((x) => dot(v.d, x));
      const qc = query([v.c])[0]!;
      const cq = c.map((x) => dot(qc, x));
      return (w) => Float64Array.from(dq, (s, j) => mix(w, s, cq[j]!));
    },
  };
}

async function lens(
  images: LabelledImage[],
  cnn: Embedder,
  dbs: Record<string, LensDb>,
): Promise<Record<string, Record<string, Record<string, number>>>> {
  const digest = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
  const photo = images.map((i) => digest(i.bytes));
  const names = Object.keys(dbs);
  const out: Record<string, Record<string, Record<string, number>>> = {};
  for (const [change, apply] of Object.entries(LENS_CHANGES)) {
    const hits = names.map((t) => dbs[t]!.ws.map(() => 0));
    for (let qi = 0; qi < images.length; qi++) {
      const cap = new Capture(cnn.inputSize);
      await new SharpImageAnalyzer(cap).queryVectors(await apply(images[qi]!.bytes));
      const views: ViewParts[] = [];
      for (const p of cap.seen) views.push({ d: await descriptorOf(p), c: await cnn.embed(p) });
      names.forEach((t, ti) => {
        const scorers = views.map((v) => dbs[t]!.score(v));
        dbs[t]!.ws.forEach((w, wi) => {
          // each item at its best over the query's views, as bestOf in the service
          const byView = scorers.map((f) => f(w));
          let best = -2;
          let at = -1;
          for (let j = 0; j < images.length; j++) {
            let s = -2;
            for (const sv of byView) s = Math.max(s, sv[j]!);
            if (s > best) [best, at] = [s, j];
          }
          if (photo[at] === photo[qi]) hits[ti]![wi]!++;
        });
      });
    }
    names.forEach((t, ti) => {
      (out[t] ??= {})[change] = Object.fromEntries(
        dbs[t]!.ws.map((w, wi) => [w.toFixed(3), r4(hits[ti]![wi]! / images.length)]),
      );
      console.log(`  lens ${t} ${change}:`, JSON.stringify(out[t]![change]));
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

/**
 * The food photos in two halves by photo file (one file is several foods' picture, and the
 * same file in both halves would let a fit on one half see the other).
 */
function foodHalves(food: LabelledImage[]): [number[], number[]] {
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
  return [halfA, halfB];
}

async function trialsAB(): Promise<void> {
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
  const [halfA, halfB] = foodHalves(sets.food!);

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
          `B constrained ${cnnName} ${row.spec} ${row.mode}: w.525 ${JSON.stringify(row.w525)} best-with-shapes>=.93 ${JSON.stringify(row.feasible)}`,
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
    const foodParts = parts.food!.lite0!;
    result.lens_lite0_whitened = await lens(
      sets.food!,
      cnns.lite0!,
      Object.fromEntries(
        Object.entries(transforms).map(([t, f]) => [
          t,
          partsDb(foodParts.d, f(foodParts.c), [0.5, 0.525, 0.55], f),
        ]),
      ),
    );
    writeOut(result);
  }

  if (process.env.TRIAL_LENS === '1') {
    const ws = [0, 0.4, 0.45, 0.5, 0.525, 0.55, 0.6];
    const lensOut: Record<string, unknown> = {};
    for (const [cnnName, cnn] of Object.entries(cnns))
      lensOut[cnnName] = await lens(sets.food!, cnn, {
        raw: partsDb(parts.food![cnnName]!.d, parts.food![cnnName]!.c, ws),
      });
    result.lens_r_at_1_by_descriptor_share = lensOut;
    writeOut(result);
  }
  console.log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

// ---------------------------------------------------------------------------------------------
// Trials C, D: index-time averages over views of each indexed image
// ---------------------------------------------------------------------------------------------

const VIEWS_CACHE = path.join(REPO, '.cache', 'embedding-trials');
/** Views of each indexed image: the service's decode first, then what an average may add. */
const VIEWS = [
  'whole',
  'mirror',
  'centre',
  'top-left',
  'top-right',
  'bottom-left',
  'bottom-right',
] as const;
type View = (typeof VIEWS)[number];
/** Side of a crop as a share of the image's: 80 % keeps the subject of a product photo. */
const CROP = 0.8;

/**
 * The index-time averages tried: each part of an indexed item's vector is the mean of its
 * vectors of these views. The parts are averaged apart because a descriptor view costs about a
 * millisecond and a model run several.
 */
interface Average {
  cnn: View[];
  descriptor: View[];
}
const CORNERS: View[] = ['top-left', 'top-right', 'bottom-left', 'bottom-right'];
const AVERAGES: Record<string, Average> = {
  'none (default)': { cnn: ['whole'], descriptor: ['whole'] },
  'C mirror, CNN part': { cnn: ['whole', 'mirror'], descriptor: ['whole'] },
  'C mirror, descriptor part': { cnn: ['whole'], descriptor: ['whole', 'mirror'] },
  'C mirror, both parts': { cnn: ['whole', 'mirror'], descriptor: ['whole', 'mirror'] },
  'D centre, CNN part': { cnn: ['whole', 'centre'], descriptor: ['whole'] },
  'D centre, descriptor part': { cnn: ['whole'], descriptor: ['whole', 'centre'] },
  'D centre, both parts': { cnn: ['whole', 'centre'], descriptor: ['whole', 'centre'] },
  'D centre+corners, CNN part': { cnn: ['whole', 'centre', ...CORNERS], descriptor: ['whole'] },
  'D centre+corners, descriptor part': {
    cnn: ['whole'],
    descriptor: ['whole', 'centre', ...CORNERS],
  },
  'D centre+corners, both parts': {
    cnn: ['whole', 'centre', ...CORNERS],
    descriptor: ['whole', 'centre', ...CORNERS],
  },
};

async function flop(p: Pixels): Promise<Pixels> {
  const raw = { width: p.size, height: p.size, channels: 3 as const };
  return { data: await sharp(p.data, { raw }).flop().raw().toBuffer(), size: p.size };
}

/**
 * The first `n` of the centre and four corner crops at the CNN's own resolution: cut from a
 * decode at size ÷ 0.8, so a crop is not an upsampled piece of the 224 decode.
 */
async function crops(bytes: Buffer, size: number, n = 5): Promise<Pixels[]> {
  const big = await decode(bytes, Math.round(size / CROP));
  const m = big.size - size;
  const raw = { width: big.size, height: big.size, channels: 3 as const };
  const at: Array<[number, number]> = [
    [Math.floor(m / 2), Math.floor(m / 2)],
    [0, 0],
    [m, 0],
    [0, m],
    [m, m],
  ];
  return Promise.all(
    at.slice(0, n).map(async ([left, top]) => ({
      data: await sharp(big.data, { raw })
        .extract({ left, top, width: size, height: size })
        .raw()
        .toBuffer(),
      size,
    })),
  );
}

type ViewParts7 = Record<View, { d: Float32Array[]; c: Float32Array[] }>;

/** Both parts of every view of every image, cached like partsFor (keyed by the model's sha). */
async function viewsFor(
  setName: string,
  images: LabelledImage[],
  cnn: Embedder,
): Promise<ViewParts7> {
  const key = crypto
    .createHash('sha256')
    .update(images.map((i) => i.id).join(','))
    .update(fs.readFileSync(EFFICIENTNET_SHA256))
    .update(`views-v1 ${VIEWS.join(',')} crop ${CROP}`)
    .digest('hex')
    .slice(0, 12);
  const file = path.join(VIEWS_CACHE, `views-${setName}-${key}.f32`);
  const dd = desc.dimensions;
  const dc = cnn.dimensions;
  const stride = VIEWS.length * (dd + dc);
  const out = Object.fromEntries(VIEWS.map((v) => [v, { d: [], c: [] }])) as unknown as ViewParts7;
  if (fs.existsSync(file)) {
    const buf = fs.readFileSync(file);
    const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    images.forEach((_, i) =>
      VIEWS.forEach((v, vi) => {
        const at = i * stride + vi * (dd + dc);
        out[v].d.push(all.slice(at, at + dd));
        out[v].c.push(all.slice(at + dd, at + dd + dc));
      }),
    );
    return out;
  }
  const all = new Float32Array(images.length * stride);
  for (const [i, img] of images.entries()) {
    const whole = await decode(img.bytes, cnn.inputSize);
    const px = [whole, await flop(whole), ...(await crops(img.bytes, cnn.inputSize))];
    for (const [vi, p] of px.entries()) {
      const d = await descriptorOf(p);
      const c = await cnn.embed(p);
      out[VIEWS[vi]!].d.push(d);
      out[VIEWS[vi]!].c.push(c);
      all.set(d, i * stride + vi * (dd + dc));
      all.set(c, i * stride + vi * (dd + dc) + dd);
    }
  }
  fs.writeFileSync(file, Buffer.from(all.buffer));
  return out;
}

/** The normalised mean of unit vectors (what an index-time average would store). */
function meanUnit(vs: Float32Array[]): Float32Array {
  const out = new Float32Array(vs[0]!.length);
  for (const v of vs) for (let i = 0; i < v.length; i++) out[i]! += v[i]!;
  normalise(out);
  return out;
}

const FINE = Array.from({ length: 21 }, (_, i) => +(0.3 + i * 0.025).toFixed(3));

/** The share with the best food P@10 among those where shapes keep their goal (≥ 0.93). */
function feasible(per: Record<string, number[]>): Record<string, number> | null {
  let bestI = -1;
  FINE.forEach((_, i) => {
    if (per.shapes![i]! >= 0.93 && (bestI < 0 || per.food![i]! > per.food![bestI]!)) bestI = i;
  });
  if (bestI < 0) return null;
  return {
    w: FINE[bestI]!,
    ...Object.fromEntries(Object.keys(per).map((s) => [s, per[s]![bestI]!])),
  };
}

/**
 * Per indexed image, each pipeline as a worker would run it (decode, descriptor, model runs),
 * interleaved so load on the shared machine falls on all alike.
 */
async function averageTiming(images: LabelledImage[], cnn: Embedder) {
  const n = Number(process.env.TRIAL_TIMING_N ?? 60);
  const size = cnn.inputSize;
  const embed = async (b: Buffer, a: Average) => {
    const whole = await decode(b, size);
    const need = new Set([...a.cnn, ...a.descriptor]);
    const px: Partial<Record<View, Pixels>> = { whole };
    if (need.has('mirror')) px.mirror = await flop(whole);
    const cropViews = VIEWS.slice(2).filter((v) => need.has(v));
    if (cropViews.length)
      (await crops(b, size, cropViews.length)).forEach((p, i) => (px[VIEWS[2 + i]!] = p));
    for (const v of a.descriptor) await descriptorOf(px[v]!);
    for (const v of a.cnn) await cnn.embed(px[v]!);
  };
  const sample = images.slice(0, n);
  for (const a of Object.values(AVERAGES))
    for (const img of sample.slice(0, 5)) await embed(img.bytes, a);
  const ms: Record<string, number[]> = Object.fromEntries(
    Object.keys(AVERAGES).map((k) => [k, []]),
  );
  const loadBefore = os.loadavg().map((x) => +x.toFixed(2));
  for (let round = 0; round < 3; round++)
    for (const [name, a] of Object.entries(AVERAGES))
      for (const img of sample) {
        const t0 = performance.now();
        await embed(img.bytes, a);
        ms[name]!.push(performance.now() - t0);
      }
  return {
    what: 'ms per indexed food photo: decode(s), descriptor and model runs of the views averaged (model threads: the cores)',
    load_average_before: loadBefore,
    load_average_after: os.loadavg().map((x) => +x.toFixed(2)),
    ...Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, stats(v)])),
  };
}

// ---------------------------------------------------------------------------------------------
// Trial E: smaller stored vectors for the hybrid, exact cosine search, queries in float32
// ---------------------------------------------------------------------------------------------

/** The default hybrid's vector from its unit parts (HybridEmbedder's arithmetic). */
function hybridOf(d: Float32Array, c: Float32Array, w = DEFAULT_W): Float32Array {
  const out = new Float32Array(d.length + c.length);
  out.set(d.map((x) => x * w));
  out.set(
    c.map((x) => x * (1 - w)),
    d.length,
  );
  normalise(out);
  return out;
}

/** x rounded to the nearest IEEE half-precision value, ties to even (Node 20 has no Float16Array). */
function toHalf(x: number): number {
  const a = Math.abs(x);
  if (a === 0 || !Number.isFinite(a)) return x;
  if (a >= 65520) return Math.sign(x) * Infinity;
  let e = Math.max(-14, Math.floor(Math.log2(a)));
  if (e > -14 && 2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const q = 2 ** (e - 10);
  const v = a / q;
  let r = Math.round(v);
  if (r - v === 0.5 && r % 2 === 1) r--;
  return Math.sign(x) * r * q;
}

/** The IEEE half-precision bits of x (after toHalf), for a Uint16Array store. */
function halfBits(x: number): number {
  const h = toHalf(x);
  const sign = h < 0 || Object.is(h, -0) ? 0x8000 : 0;
  const a = Math.abs(h);
  if (a === 0) return sign;
  if (a < 2 ** -14) return sign | Math.round(a / 2 ** -24);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  return sign | ((e + 15) << 10) | Math.round((a / 2 ** e - 1) * 1024);
}

/**
 * An exact scan as the embedded engine does it (one query against every stored row, JS loops),
 * over rows stored as float32, float16 (a Uint16Array read through a 65,536-entry table: Node 20
 * has no Float16Array) and int8 with a scale per row, and a 256-d float32 row for comparison.
 * Interleaved rounds; ms per 100,000 rows scaled from `rows`.
 */
function scanTiming(H: Float32Array[], rows = Number(process.env.TRIAL_SCAN_ROWS ?? 20000)) {
  const d = H[0]!.length;
  const f32 = new Float32Array(rows * d);
  const f16 = new Uint16Array(rows * d);
  const i8 = new Int8Array(rows * d);
  const scale = new Float32Array(rows);
  const low = new Float32Array(rows * 256);
  const half = H.map((x) => Uint16Array.from(x, halfBits));
  for (let r = 0; r < rows; r++) {
    const x = H[r % H.length]!;
    f32.set(x, r * d);
    f16.set(half[r % H.length]!, r * d);
    low.set(x.subarray(0, 256), r * 256);
    let max = 0;
    for (let i = 0; i < d; i++) max = Math.max(max, Math.abs(x[i]!));
    scale[r] = max / 127;
    for (let i = 0; i < d; i++) i8[r * d + i] = Math.round(x[i]! / scale[r]!);
  }
  const table = new Float32Array(65536);
  for (let b = 0; b < 65536; b++) {
    const e = (b >> 10) & 31;
    const m = b & 1023;
    const v = e === 0 ? m * 2 ** -24 : e === 31 ? Infinity : (1 + m / 1024) * 2 ** (e - 15);
    table[b] = b & 0x8000 ? -v : v;
  }
  for (let i = 0; i < d; i++)
    if (table[f16[i]!] !== toHalf(f32[i]!)) throw new Error(`float16 bits of ${f32[i]} wrong`);
  const q = H[1]!;
  const out = new Float32Array(rows);
  const scans: Record<string, () => void> = {
    float32: () => {
      for (let r = 0; r < rows; r++) {
        let s = 0;
        const b = r * d;
        for (let i = 0; i < d; i++) s += q[i]! * f32[b + i]!;
        out[r] = s;
      }
    },
    float16: () => {
      for (let r = 0; r < rows; r++) {
        let s = 0;
        const b = r * d;
        for (let i = 0; i < d; i++) s += q[i]! * table[f16[b + i]!]!;
        out[r] = s;
      }
    },
    'int8, one scale per vector': () => {
      for (let r = 0; r < rows; r++) {
        let s = 0;
        const b = r * d;
        for (let i = 0; i < d; i++) s += q[i]! * i8[b + i]!;
        out[r] = s * scale[r]!;
      }
    },
    'float32 at 256-d (PCA 256)': () => {
      for (let r = 0; r < rows; r++) {
        let s = 0;
        const b = r * 256;
        for (let i = 0; i < 256; i++) s += q[i]! * low[b + i]!;
        out[r] = s;
      }
    },
  };
  const ms: Record<string, number[]> = Object.fromEntries(Object.keys(scans).map((k) => [k, []]));
  for (const f of Object.values(scans)) f();
  const loadBefore = os.loadavg().map((x) => +x.toFixed(2));
  for (let round = 0; round < 7; round++)
    for (const [name, f] of Object.entries(scans)) {
      const t0 = performance.now();
      f();
      ms[name]!.push(((performance.now() - t0) * 100000) / rows);
    }
  return {
    what: `ms per exact scan of 100,000 stored rows (${rows} scanned, scaled), ${d}-d query in float32`,
    memory_bytes_per_100k: { float32: 4 * d * 1e5, float16: 2 * d * 1e5, int8: (d + 4) * 1e5 },
    load_average_before: loadBefore,
    load_average_after: os.loadavg().map((x) => +x.toFixed(2)),
    ...Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, stats(v)])),
  };
}

/** Symmetric int8 (−127…127) with one scale per slice of the vector, dequantised. */
function int8PerSlice(x: Float32Array, cuts: number[]): Float32Array {
  const out = new Float32Array(x.length);
  const bounds = [0, ...cuts, x.length];
  for (let b = 0; b + 1 < bounds.length; b++) {
    let max = 0;
    for (let i = bounds[b]!; i < bounds[b + 1]!; i++) max = Math.max(max, Math.abs(x[i]!));
    const scale = max / 127 || 1;
    for (let i = bounds[b]!; i < bounds[b + 1]!; i++) out[i] = Math.round(x[i]! / scale) * scale;
  }
  return out;
}

/**
 * One clipping range for every component of every stored vector, as Lucene's scalar quantiser
 * fits it (quantiles at confidence 1 − 1/(d + 1)), 256 levels. Fitted on the stored set.
 */
function int8GlobalRange(X: Float32Array[]): (x: Float32Array) => Float32Array {
  const d = X[0]!.length;
  const all = new Float32Array(X.length * d);
  X.forEach((x, i) => all.set(x, i * d));
  all.sort();
  const tail = 1 / (d + 1) / 2;
  const lo = all[Math.floor(tail * (all.length - 1))]!;
  const hi = all[Math.ceil((1 - tail) * (all.length - 1))]!;
  const step = (hi - lo) / 255;
  return (x) =>
    Float32Array.from(
      x,
      (v) => lo + Math.round((Math.min(hi, Math.max(lo, v)) - lo) / step) * step,
    );
}

/** n × n cosine of queries Q (rows) against stored X (rows, any length). */
function cross(
  Q: Array<Float32Array | Float64Array>,
  X: Array<Float32Array | Float64Array>,
): Float64Array {
  const n = Q.length;
  const m = new Float64Array(n * n);
  const qn = Q.map((q) => Math.sqrt(dot(q, q)));
  const xn = X.map((x) => Math.sqrt(dot(x, x)));
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) m[i * n + j] = dot(Q[i]!, X[j]!) / (qn[i]! * xn[j]! || 1);
  return m;
}

/** P@10 from one similarity matrix (precision() with the CNN share 1 reads only it). */
const p10 = (labels: string[], S: Float64Array, subset?: number[]) =>
  precision(labels, S, S, 0, subset);

interface Reduction {
  name: string;
  bytes: number;
  /** what is stored for each item */
  store: (X: Float32Array[]) => Array<Float32Array | Float64Array>;
  /** the float32 query as searched against it (projected, never quantised) */
  query: (q: Float32Array) => Float32Array | Float64Array;
}

const same = (q: Float32Array) => q;

function quantisations(dd: number): Reduction[] {
  const d = dd + 1280;
  return [
    { name: 'float32 (default)', bytes: 4 * d, store: (X) => X, query: same },
    { name: 'float16', bytes: 2 * d, store: (X) => X.map((x) => x.map(toHalf)), query: same },
    {
      name: 'int8, one scale per vector',
      bytes: d + 4,
      store: (X) => X.map((x) => int8PerSlice(x, [])),
      query: same,
    },
    {
      name: 'int8, one scale per part',
      bytes: d + 8,
      store: (X) => X.map((x) => int8PerSlice(x, [dd])),
      query: same,
    },
    {
      name: 'int8, one range for all (Lucene-style)',
      bytes: d + 4,
      store: (X) => X.map(int8GlobalRange(X)),
      query: same,
    },
  ];
}

const PCA_KS = [512, 256, 128];

/** Centred PCA to k dimensions (normalised after), fitted on `fit`; `k` 0 = centring only. */
function pcaReduction(label: string, fit: Pca, k: number): Reduction {
  if (k === 0) {
    return {
      name: `centre only (${label})`,
      bytes: 4 * fit.mu.length,
      store: (X) => centred(X, fit.mu),
      query: (q) => centred([q], fit.mu)[0]!,
    };
  }
  const used = Math.min(k, fit.dirs.length);
  const spec: WhiteSpec = { k: used, power: 0, eps: 'tiny' };
  return {
    name: `PCA ${k}${used < k ? ` (${used}: the fit set's rank)` : ''} (${label})`,
    bytes: 4 * used,
    store: (X) => applyPca(fit, X, spec).out,
    query: (q) => applyPca(fit, [q], spec).out[0]!,
  };
}

// ---------------------------------------------------------------------------------------------

async function trialsCDE(letters: string): Promise<void> {
  fs.mkdirSync(VIEWS_CACHE, { recursive: true });
  const t0 = Date.now();
  const secs = () => `${((Date.now() - t0) / 1000).toFixed(0)} s`;
  const run: Record<string, unknown> = {
    date: new Date().toISOString(),
    trials: letters,
    load_average_at_start: os.loadavg().map((x) => +x.toFixed(2)),
    cores: os.availableParallelism(),
    model_sha256: fs.readFileSync(EFFICIENTNET_SHA256, 'utf8').trim().split(/\s+/)[0],
    method:
      'exact cosine search, leave-one-out, P@10 = share of the top 10 with the query label; w = descriptor share (0.525 is the default hybrid, 0 the CNN alone)',
  };
  const result: Record<string, unknown> = { trials_CDE_run: run };
  const cnn = await EfficientNetEmbedder.load();
  const sets: Record<string, LabelledImage[]> = {
    food: await foodImages(),
    shapes: await labelledImages(PER_CLASS),
  };
  if (process.env.TRIAL_MNIST !== '0') sets.mnist = await mnistImages(PER_CLASS);
  const setNames = Object.keys(sets);
  const labels = Object.fromEntries(setNames.map((k) => [k, sets[k]!.map((i) => i.label)]));
  const views: Record<string, ViewParts7> = {};
  for (const s of setNames) {
    views[s] = await viewsFor(s, sets[s]!, cnn);
    console.log(`views ${s} ready (${secs()})`);
  }

  if (/[CD]/.test(letters)) {
    const rows: Array<Record<string, unknown>> = [];
    const lensDbs: Record<string, LensDb> = {};
    for (const [name, a] of Object.entries(AVERAGES)) {
      if (!name.startsWith('none') && !letters.includes(name[0]!)) continue;
      const per: Record<string, number[]> = {};
      const at: Record<string, { cnn: number; w525: number }> = {};
      let food: { d: Float32Array[]; c: Float32Array[] } | undefined;
      for (const s of setNames) {
        const V = views[s]!;
        const mean = (part: 'c' | 'd', vs: View[]) =>
          V.whole[part].map((_, i) =>
            vs.length > 1 ? meanUnit(vs.map((v) => V[v][part][i]!)) : V[vs[0]!][part][i]!,
          );
        const c = mean('c', a.cnn);
        const d = mean('d', a.descriptor);
        const D = gram(d);
        const C = gram(c);
        per[s] = FINE.map((w) => precision(labels[s]!, D, C, w));
        at[s] = { cnn: precision(labels[s]!, D, C, 0), w525: per[s]![FINE.indexOf(DEFAULT_W)]! };
        if (s === 'food') food = { d, c };
      }
      const best = per.shapes ? feasible(per) : null;
      const row = {
        average: name,
        model_runs_per_image: a.cnn.length,
        descriptor_views: a.descriptor.length,
        cnn_alone: Object.fromEntries(setNames.map((s) => [s, at[s]!.cnn])),
        hybrid_w525: Object.fromEntries(setNames.map((s) => [s, at[s]!.w525])),
        best_with_shapes_goal: best,
        by_w: Object.fromEntries(
          FINE.map((w, i) => [w.toFixed(3), setNames.map((s) => per[s]![i]).join('/')]),
        ),
      };
      rows.push(row);
      if (food)
        lensDbs[name] = partsDb(food.d, food.c, [
          ...new Set([0, DEFAULT_W, ...(best ? [best.w!] : [])]),
        ]);
      console.log(
        `CD ${name}: cnn ${JSON.stringify(row.cnn_alone)} w.525 ${JSON.stringify(row.hybrid_w525)} best ${JSON.stringify(best)}`,
      );
    }
    result.trialCD_index_time_averages = rows;
    writeOut(result);
    result.trialCD_ms_per_image = await averageTiming(sets.food!, cnn);
    console.log('CD ms per image:', result.trialCD_ms_per_image, `(${secs()})`);
    writeOut(result);
    if (process.env.TRIAL_LENS !== '0') {
      result.trialCD_lens_r_at_1 = await lens(sets.food!, cnn, lensDbs);
      console.log(`CD lens done (${secs()})`);
      writeOut(result);
    }
  }

  if (letters.includes('E')) {
    const dd = desc.dimensions;
    const H = Object.fromEntries(
      setNames.map((s) => [s, views[s]!.whole.d.map((d, i) => hybridOf(d, views[s]!.whole.c[i]!))]),
    );
    const [halfA, halfB] = foodHalves(sets.food!);
    const tFit = Date.now();
    const fits: Record<string, Pca> = {};
    const fitBoth = (name: string, X: Float32Array[]) => {
      fits[name] = fitPca(X, { eigen: householderEigen });
      fits[`${name}, uncentred`] = fitPca(X, { centre: false, eigen: householderEigen });
    };
    for (const s of setNames) {
      fitBoth(`self ${s}`, H[s]!);
      fitBoth(
        `others of ${s}`,
        setNames.filter((o) => o !== s).flatMap((o) => H[o]!),
      );
    }
    fitBoth(
      'food half A',
      halfA.map((i) => H.food![i]!),
    );
    fitBoth(
      'food half B',
      halfB.map((i) => H.food![i]!),
    );
    console.log(
      `E: ${Object.keys(fits).length} PCA fits in ${((Date.now() - tFit) / 1000).toFixed(0)} s`,
    );
    // uncentred, the projection only drops dimensions; centred, it also moves the origin to the
    // fit set's mean, which changes every cosine (the "centre only" rows show by how much)
    const pcas = (label: string, fit: string) => [
      ...[0, ...PCA_KS].map((k) => pcaReduction(label, fits[fit]!, k)),
      ...PCA_KS.map((k) => pcaReduction(`uncentred, ${label}`, fits[`${fit}, uncentred`]!, k)),
    ];
    const rowsE: Record<string, Array<Record<string, unknown>>> = {};
    const measure = (s: string, r: Reduction, subset?: number[]) => {
      const X = r.store(H[s]!);
      const Q = H[s]!.map(r.query);
      return p10(labels[s]!, cross(Q, X), subset);
    };
    for (const s of setNames) {
      const base = p10(labels[s]!, cross(H[s]!, H[s]!));
      const reductions = [
        ...quantisations(dd),
        ...pcas('fitted on the other sets', `others of ${s}`),
        ...pcas('fitted on the set itself', `self ${s}`),
      ];
      rowsE[s] = reductions.map((r) => {
        const p = measure(s, r);
        const row = { vector: r.name, bytes: r.bytes, p_at_10: p, change: r4(p - base) };
        console.log(`E ${s}`, JSON.stringify(row));
        return row;
      });
    }
    // a per-dataset fit made on the items there were, applied to the ones added after it
    const halves: Array<Record<string, unknown>> = [];
    for (const [fitOn, on, sub] of [
      ['food half A', 'B', halfB],
      ['food half B', 'A', halfA],
    ] as const) {
      const base = measure('food', quantisations(dd)[0]!, [...sub]);
      for (const r of pcas(`fitted on ${fitOn}`, fitOn)) {
        const p = measure('food', r, [...sub]);
        const row = {
          measured_on: `food half ${on}`,
          vector: r.name,
          p_at_10: p,
          change: r4(p - base),
        };
        halves.push(row);
        console.log('E', JSON.stringify(row));
      }
    }
    result.trialE_reduced_vectors = {
      hybrid: `w ${DEFAULT_W}`,
      by_set: rowsE,
      food_halves: halves,
    };
    writeOut(result);
    result.trialE_scan_ms = scanTiming(H.food!);
    console.log('E scan:', result.trialE_scan_ms);
    writeOut(result);
    if (process.env.TRIAL_LENS !== '0') {
      const food = H.food!;
      const dbs: Record<string, LensDb> = {};
      for (const r of [
        ...quantisations(dd),
        ...pcas('fitted on the other sets', 'others of food'),
        ...pcas('fitted on the set itself', 'self food'),
      ]) {
        const X = r.store(food);
        const xn = X.map((x) => Math.sqrt(dot(x, x)));
        dbs[r.name] = {
          ws: [DEFAULT_W],
          score(v) {
            const q = r.query(hybridOf(v.d, v.c));
            const qn = Math.sqrt(dot(q, q));
            const s = Float64Array.from(X, (x, j) => dot(q, x) / (qn * xn[j]!));
            return () => s;
          },
        };
      }
      result.trialE_lens_r_at_1 = await lens(sets.food!, cnn, dbs);
      writeOut(result);
    }
  }
  run.load_average_at_end = os.loadavg().map((x) => +x.toFixed(2));
  run.seconds = Math.round((Date.now() - t0) / 1000);
  writeOut(result);
  console.log(`done in ${secs()}`);
}

async function main(): Promise<void> {
  const letters = (process.env.TRIALS ?? 'AB').toUpperCase();
  if (/[AB]/.test(letters)) await trialsAB();
  if (/[CDE]/.test(letters)) await trialsCDE(letters);
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

/** Merged into the file: a run of some trials keeps the recorded figures of the others. */
function writeOut(result: Record<string, unknown>): void {
  const file = path.join(RESULTS_DIR, 'embedding-trials.json');
  const before = fs.existsSync(file)
    ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>)
    : {};
  writeResult('embedding-trials', {
    ...before,
    benchmark: 'embedding-trials',
    machine: machine(),
    ...result,
  });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
