/**
 * Tuned similarity (contract §20): a shrinkage-LDA projection of a dataset's stored embeddings
 * that separates its labels, and the blend of plain and projected cosines it ranks by.
 *
 * The fit is scikit-learn's LinearDiscriminantAnalysis(solver='eigen', shrinkage='auto') with
 * one pooled within-class covariance, with three changes that hold up better when only part of
 * a catalogue is labelled: a floor under the shrinkage, labels of two items taking part, and
 * projections centred on the mean of the class means. Its cost is kept bounded at any size: class means come
 * from every item, the D × D within-class scatter from a stratified sample of at most
 * `maxCovItems` items, and the generalised eigenproblem is solved through a Cholesky factor and
 * a C × C matrix (C = number of labels) instead of a D × D one.
 */
import { seededRandom } from '../../lib/seeded-random';
import {
  addOuterProducts,
  choleskyInPlace,
  dot,
  packedLength,
  rowBase,
  solve,
  solveTransposed,
  symmetricEigen,
} from './linalg';

export interface Labelled {
  /** L2-unit, length D */
  vector: Float32Array;
  label: string;
  /** near-copies share a group: cross-validation never splits one */
  group: string;
}

export interface Projection {
  /** D, the input length */
  dims: number;
  /** output dims: min(classes − 1, MAX_OUTPUT_DIMS, D) */
  k: number;
  /** D: the centre subtracted before projecting */
  mean: Float32Array;
  /** D × k row-major: z_c = Σ_j (x_j − mean_j) · basis[j * k + c] */
  basis: Float32Array;
}

/** A label takes part in activation, in the count of classes and in the check's queries with this many. */
export const MIN_CLASS_ITEMS = 5;
/**
 * A label takes part in a fit with this many: a training fold of a partly labelled set keeps
 * the labels it has only a few items of, which a fit is better with than without.
 */
const FIT_CLASS_ITEMS = 2;
/**
 * The least shrinkage of the within-class covariance towards its diagonal. Ledoit–Wolf's own
 * estimate trusts the few items of a partly labelled fold too much; held-out precision rises
 * up to about this floor and falls past it (docs/embedders.md).
 */
export const MIN_SHRINKAGE = 0.6;
const MAX_OUTPUT_DIMS = 64;
/**
 * The scatter's pass costs in proportion to it (D²/2 per row); at 100,000 real items, twice as
 * many rows moved held-out precision@10 by less than 0.005.
 */
const DEFAULT_COV_ITEMS = 3000;

export interface FitOptions {
  /** items the within-class scatter is estimated from (a stratified sample) */
  maxCovItems?: number;
  seed?: number;
}

/** The labels that take part in a fit: every label of at least FIT_CLASS_ITEMS items. */
export interface Classes {
  /** per item: its class, or −1 when its label is left out */
  of: Int32Array;
  names: string[];
  /** per class: its items */
  sizes: number[];
}

export function classesOf(items: readonly Labelled[]): Classes {
  const counts = new Map<string, number>();
  for (const it of items) counts.set(it.label, (counts.get(it.label) ?? 0) + 1);
  // sorted, so that class numbers (and the float sums in their order) do not depend on item order
  const names = [...counts]
    .filter(([, n]) => n >= FIT_CLASS_ITEMS)
    .map(([name]) => name)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (names.filter((name) => counts.get(name)! >= MIN_CLASS_ITEMS).length < 2)
    throw new Error(`tuning needs at least 2 labels with ${MIN_CLASS_ITEMS} items each`);
  const index = new Map(names.map((name, c) => [name, c]));
  return {
    of: Int32Array.from(items, (it) => index.get(it.label) ?? -1),
    names,
    sizes: names.map((name) => counts.get(name)!),
  };
}

export function checkDims(items: readonly Labelled[]): number {
  const dims = items[0]?.vector.length ?? 0;
  if (dims === 0) throw new Error('tuning needs vectors');
  for (const it of items)
    if (it.vector.length !== dims) throw new Error('tuning needs vectors of one length');
  return dims;
}

/**
 * The items the within-class scatter is estimated from, ascending: a seeded sample of each
 * class in proportion to its size, but at least MIN_CLASS_ITEMS of it, so no label is lost.
 */
export function covarianceSample(
  classes: Classes,
  maxCovItems = DEFAULT_COV_ITEMS,
  seed = 1,
): Int32Array {
  const members: number[][] = classes.names.map(() => []);
  classes.of.forEach((c, i) => c >= 0 && members[c]!.push(i));
  const total = members.reduce((n, m) => n + m.length, 0);
  const rand = seededRandom(seed);
  const chosen: number[] = [];
  for (const m of members) {
    const quota = Math.min(
      m.length,
      Math.max(MIN_CLASS_ITEMS, Math.round((maxCovItems * m.length) / total)),
    );
    // partial Fisher–Yates: the first `quota` places end up a uniform sample
    for (let i = 0; i < quota; i++) {
      const j = i + Math.floor(rand() * (m.length - i));
      [m[i], m[j]] = [m[j]!, m[i]!];
      chosen.push(m[i]!);
    }
  }
  return Int32Array.from(chosen).sort();
}

/**
 * What a fit needs from a set of items, as sums: so cross-validation sums each fold once and a
 * training part's moments are the other folds' added up, with no pass over the items per fold.
 */
export interface Moments {
  dims: number;
  /** C: items per class */
  count: Float64Array;
  /** C × D: the sum of each class's vectors */
  sum: Float64Array;
  /** the same two over the covariance sample */
  sampleCount: Float64Array;
  sampleSum: Float64Array;
  /** Σ x xᵀ over the covariance sample, packed (linalg.ts) */
  second: Float64Array;
}

export function emptyMoments(dims: number, classes: number): Moments {
  return {
    dims,
    count: new Float64Array(classes),
    sum: new Float64Array(classes * dims),
    sampleCount: new Float64Array(classes),
    sampleSum: new Float64Array(classes * dims),
    second: new Float64Array(packedLength(dims)),
  };
}

/** The moments of `members` (item indices) with `sample` (drawn from them, kept classes only). */
export function momentsOf(
  items: readonly Labelled[],
  classes: Classes,
  members: ArrayLike<number>,
  sample: ArrayLike<number>,
): Moments {
  const d = items[0]!.vector.length;
  const m = emptyMoments(d, classes.names.length);
  const add = (count: Float64Array, sum: Float64Array, list: ArrayLike<number>) => {
    for (let n = 0; n < list.length; n++) {
      const i = list[n]!;
      const c = classes.of[i]!;
      if (c < 0) continue;
      count[c]++;
      const v = items[i]!.vector;
      for (let j = 0, o = c * d; j < d; j++) sum[o + j] += v[j]!;
    }
  };
  add(m.count, m.sum, members);
  add(m.sampleCount, m.sampleSum, sample);
  addOuterProducts(
    m.second,
    d,
    Array.from(sample, (i) => items[i]!.vector),
  );
  return m;
}

/** into = Σ parts, field by field. */
export function sumMoments(parts: readonly Moments[], into: Moments): void {
  for (const key of ['count', 'sum', 'sampleCount', 'sampleSum', 'second'] as const) {
    const out = into[key];
    out.fill(0);
    for (const part of parts) {
      const from = part[key];
      for (let i = 0; i < out.length; i++) out[i] += from[i]!;
    }
  }
}

/**
 * The projection from a set's moments. `sample` lists the set's covariance-sample items (for
 * the Ledoit–Wolf fourth moment, which is not additive). Consumes m.second.
 */
export function fitMoments(
  m: Moments,
  items: readonly Labelled[],
  classes: Classes,
  sample: ArrayLike<number>,
): Projection {
  const d = m.dims;
  const kept: number[] = [];
  m.count.forEach((n, c) => n >= FIT_CLASS_ITEMS && kept.push(c));
  if (kept.length < 2)
    throw new Error(`tuning needs at least 2 labels with ${FIT_CLASS_ITEMS} items each`);
  const n = kept.reduce((s, c) => s + m.count[c]!, 0);
  const mean = new Float64Array(d);
  for (const c of kept) for (let j = 0; j < d; j++) mean[j] += m.sum[c * d + j]! / n;
  // projections are compared by cosine, so the centre decides their angles: the mean of the
  // class means, not of the items, keeps a large label from pulling it (docs/embedders.md)
  const centre = new Float64Array(d);
  for (const c of kept)
    for (let j = 0; j < d; j++) centre[j] += m.sum[c * d + j]! / m.count[c]! / kept.length;

  const s = withinScatter(m, items, classes, sample, kept);
  choleskyInPlace(s, d);

  // S_w = UᵀU = L Lᵀ and S_b = A Aᵀ with A's columns √(n_c/n)(μ_c − μ): B = L⁻¹A, and Bᵀ B is
  // the small C × C problem
  const C = kept.length;
  const b = kept.map((c) => {
    const col = new Float64Array(d);
    const w = Math.sqrt(m.count[c]! / n);
    for (let j = 0; j < d; j++) col[j] = w * (m.sum[c * d + j]! / m.count[c]! - mean[j]!);
    solveTransposed(s, d, col);
    return col;
  });
  const g = new Float64Array(C * C);
  for (let p = 0; p < C; p++)
    for (let q = p; q < C; q++) g[p * C + q] = g[q * C + p] = dot(b[p]!, b[q]!, d);
  const eig = symmetricEigen(g, C);

  const k = Math.min(C - 1, MAX_OUTPUT_DIMS, d);
  const basis = new Float32Array(d * k);
  for (let e = 0; e < k; e++) {
    const lambda = eig.values[e]!;
    // a direction the labels do not spread along (collinear class means) carries no signal
    if (!(lambda > 1e-12 * eig.values[0]!)) continue;
    const v = new Float64Array(d);
    for (let c = 0; c < C; c++) {
      const u = eig.vectors[c * C + e]! / Math.sqrt(lambda);
      const col = b[c]!;
      for (let j = 0; j < d; j++) v[j] += u * col[j]!;
    }
    // v = L⁻ᵀ B u / √λ solves S_b v = λ S_w v with vᵀ S_w v = 1 (scikit-learn's scaling)
    solve(s, d, v);
    let big = 0;
    for (let j = 1; j < d; j++) if (Math.abs(v[j]!) > Math.abs(v[big]!)) big = j;
    const sign = v[big]! < 0 ? -1 : 1;
    for (let j = 0; j < d; j++) basis[j * k + e] = sign * v[j]!;
  }
  return { dims: d, k, mean: Float32Array.from(centre), basis };
}

/**
 * The pooled within-class covariance of the sample, shrunk towards its diagonal by Ledoit–Wolf's
 * estimate or MIN_SHRINKAGE, whichever is more, in place of m.second. Classes below
 * FIT_CLASS_ITEMS in this set (only in a training fold) are
 * taken out of it; each kept class is centred on its own sample mean.
 */
function withinScatter(
  m: Moments,
  items: readonly Labelled[],
  classes: Classes,
  sample: ArrayLike<number>,
  kept: number[],
): Float64Array {
  const d = m.dims;
  const s = m.second;
  const isKept = new Uint8Array(m.count.length);
  for (const c of kept) isKept[c] = 1;
  const dropped: Float32Array[] = [];
  for (let n = 0; n < sample.length; n++) {
    const c = classes.of[sample[n]!]!;
    if (c >= 0 && !isKept[c]) dropped.push(items[sample[n]!]!.vector);
  }
  addOuterProducts(s, d, dropped, -1);
  // Σ (x − μ_c)(x − μ_c)ᵀ = Σ x xᵀ − Σ_c n_c μ_c μ_cᵀ
  const centred = kept.filter((c) => m.sampleCount[c]! > 0);
  const means = new Map(
    centred.map((c) => [
      c,
      Float64Array.from(m.sampleSum.subarray(c * d, (c + 1) * d), (x) => x / m.sampleCount[c]!),
    ]),
  );
  const total = centred.reduce((t, c) => t + m.sampleCount[c]!, 0);
  if (total <= 0) throw new Error('tuning found no sample items to estimate the scatter from');
  addOuterProducts(
    s,
    d,
    centred.map((c) => means.get(c)!.map((x) => x * Math.sqrt(m.sampleCount[c]!))),
    -1,
  );
  for (let i = 0; i < s.length; i++) s[i] /= total;

  // Ledoit–Wolf on the standardised residuals, as scikit-learn does (it scales every feature to
  // unit variance first): the target is then diag(S), not μ·I, so a quiet direction that
  // separates labels is not drowned by the loud ones. R = D^-½ S D^-½ and ỹ = D^-½ y, and
  // Σ_k ||ỹ_k ỹ_kᵀ − R||²_F = Σ_k ||ỹ_k||⁴ − n ||R||²_F needs only ||ỹ_k||² per item.
  const inverse = new Float64Array(d);
  let trace = 0;
  for (let i = 0; i < d; i++) {
    const v = s[rowBase(i, d) + i]!;
    trace += v;
    // a constant feature stays 0 once standardised, as scikit-learn's StandardScaler leaves it
    inverse[i] = v > 0 ? 1 / v : 0;
  }
  let fourth = 0;
  for (let n = 0; n < sample.length; n++) {
    const c = classes.of[sample[n]!]!;
    const mc = c >= 0 && isKept[c] ? means.get(c) : undefined;
    if (!mc) continue;
    const x = items[sample[n]!]!.vector;
    let y2 = 0;
    for (let j = 0; j < d; j++) y2 += (x[j]! - mc[j]!) ** 2 * inverse[j]!;
    fourth += y2 * y2;
  }
  let traceR = 0;
  let frobR = 0;
  for (let i = 0; i < d; i++) {
    const row = rowBase(i, d);
    const ii = inverse[i]!;
    traceR += s[row + i]! * ii;
    frobR += (s[row + i]! * ii) ** 2;
    for (let j = i + 1; j < d; j++) frobR += 2 * s[row + j]! ** 2 * ii * inverse[j]!;
  }
  const mu = traceR / d;
  const beta = (fourth / total - frobR) / (d * total);
  const delta = (frobR - d * mu * mu) / d;
  const shrink = Math.max(
    MIN_SHRINKAGE,
    delta > 0 ? Math.min(Math.max(beta, 0), delta) / delta : 1,
  );
  // the floor keeps the factorisation defined when a feature (or every class) has no spread
  const floor = Math.max((1e-6 * trace) / d, 1e-12);
  for (let i = 0; i < d; i++) {
    const row = rowBase(i, d);
    for (let j = i + 1; j < d; j++) s[row + j] *= 1 - shrink;
    s[row + i] += floor;
  }
  return s;
}

/** Fits the projection on `items`; throws unless 2 labels have MIN_CLASS_ITEMS items each. */
export function fitProjection(items: readonly Labelled[], opts: FitOptions = {}): Projection {
  checkDims(items);
  const classes = classesOf(items);
  const sample = covarianceSample(classes, opts.maxCovItems, opts.seed);
  const m = momentsOf(
    items,
    classes,
    Array.from(items, (_, i) => i),
    sample,
  );
  return fitMoments(m, items, classes, sample);
}

/** z = basisᵀ (x − mean) into out (length k), unnormalised. */
function projectInto(p: Projection, x: ArrayLike<number>, out: Float64Array): void {
  const { k, mean, basis } = p;
  out.fill(0);
  for (let j = 0; j < p.dims; j++) {
    const y = x[j]! - mean[j]!;
    if (y === 0) continue;
    for (let c = 0, o = j * k; c < k; c++) out[c] += y * basis[o + c]!;
  }
}

/** The projected, L2-unit k-vector of x; all zeros when x projects onto the zero vector. */
export function project(p: Projection, x: Float32Array): Float32Array {
  const z = new Float64Array(p.k);
  projectInto(p, x, z);
  const norm = Math.sqrt(dot(z, z));
  return Float32Array.from(z, (v) => (norm > 0 ? v / norm : 0));
}

/** The §20 score: (1 − w) · plain cosine + w · projected cosine. */
export const blend = (weight: number, plainCos: number, tunedCos: number): number =>
  (1 - weight) * plainCos + weight * tunedCos;

/**
 * One vector whose dot product with another such vector is the blend: [√(1−w)·x, √w·project(x)],
 * so an engine's plain inner-product kNN ranks by the tuned score.
 */
export function tunedVector(p: Projection, weight: number, x: Float32Array): Float32Array {
  if (!(weight >= 0 && weight <= 1)) throw new Error('weight must be between 0 and 1');
  const out = new Float32Array(p.dims + p.k);
  const a = Math.sqrt(1 - weight);
  const b = Math.sqrt(weight);
  for (let j = 0; j < p.dims; j++) out[j] = a * x[j]!;
  const z = project(p, x);
  for (let c = 0; c < p.k; c++) out[p.dims + c] = b * z[c]!;
  return out;
}

/**
 * tunedVector with the weight moved to the query's side, so a stored vector serves every
 * weight: documents hold [x̂, project(x)] / √2 and a query [(1 − w)·q̂, w·project(q)]. Their
 * cosine is the blend divided by √2 times the query's norm, so one kNN by cosine ranks by the
 * blend and the blend is read back from it (blendFromCosine). A zero projection has no such
 * document (its cosine would be rescaled): the caller ranks it exactly instead.
 */
export function blendDocVector(x: Float32Array, z: Float32Array): Float32Array | undefined {
  const xn = Math.sqrt(dot(x, x));
  const zn = Math.sqrt(dot(z, z));
  if (!(xn > 0 && zn > 0)) return undefined;
  const out = new Float32Array(x.length + z.length);
  for (let j = 0; j < x.length; j++) out[j] = x[j]! / xn / Math.SQRT2;
  for (let c = 0; c < z.length; c++) out[x.length + c] = z[c]! / zn / Math.SQRT2;
  return out;
}

/** The query half of blendDocVector, and the factor that turns its cosine into the blend. */
export function blendQueryVector(
  weight: number,
  q: Float32Array,
  zq: Float32Array,
): { vector: Float32Array; toBlend: number } {
  const qn = Math.sqrt(dot(q, q)) || 1;
  const out = new Float32Array(q.length + zq.length);
  for (let j = 0; j < q.length; j++) out[j] = ((1 - weight) * q[j]!) / qn;
  for (let c = 0; c < zq.length; c++) out[q.length + c] = weight * zq[c]!;
  const norm = Math.sqrt(dot(out, out));
  // a query whose blend is zero everywhere (weight 1, zero projection) still needs a direction
  if (!(norm > 0)) {
    for (let j = 0; j < q.length; j++) out[j] = q[j]! / qn;
    return { vector: out, toBlend: 0 };
  }
  return { vector: out, toBlend: Math.SQRT2 * norm };
}

/** "LDA1", dims, k (uint32 little-endian), then mean and basis as float32 little-endian. */
const MAGIC = 0x3141444c;
const HEADER = 12;

export function serialise(p: Projection): Uint8Array {
  const bytes = new Uint8Array(HEADER + 4 * (p.dims + p.dims * p.k));
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, p.dims, true);
  view.setUint32(8, p.k, true);
  p.mean.forEach((v, i) => view.setFloat32(HEADER + 4 * i, v, true));
  const from = HEADER + 4 * p.dims;
  p.basis.forEach((v, i) => view.setFloat32(from + 4 * i, v, true));
  return bytes;
}

export function deserialise(bytes: Uint8Array): Projection {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < HEADER || view.getUint32(0, true) !== MAGIC)
    throw new Error('not a tuned projection');
  const dims = view.getUint32(4, true);
  const k = view.getUint32(8, true);
  if (dims === 0 || k === 0 || k > Math.min(dims, MAX_OUTPUT_DIMS))
    throw new Error(`tuned projection has impossible sizes ${dims} × ${k}`);
  if (bytes.byteLength !== HEADER + 4 * (dims + dims * k))
    throw new Error(`tuned projection of ${dims} × ${k} has ${bytes.byteLength} bytes`);
  const floats = (from: number, n: number) =>
    Float32Array.from({ length: n }, (_, i) => view.getFloat32(from + 4 * i, true));
  return { dims, k, mean: floats(HEADER, dims), basis: floats(HEADER + 4 * dims, dims * k) };
}
