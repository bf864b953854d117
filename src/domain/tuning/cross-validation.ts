/**
 * Whether a tuned projection is worth turning on (contract §20): grouped k-fold cross-validation
 * of precision@10, plain cosine against the blend, on the dataset's own labelled items.
 *
 * Cost is bounded at any size: the items ranked are a stratified sample of at most `maxCorpus`,
 * the queries at most `maxQueries` a fold, and each fold's fit starts from the other folds' sums
 * (lda.ts Moments), so the items and the D × D scatter are summed once in all, not once a fold.
 */
import { seededRandom } from '../../lib/seeded-random';
import {
  MIN_CLASS_ITEMS,
  blend,
  checkDims,
  classesOf,
  covarianceSample,
  emptyMoments,
  fitMoments,
  momentsOf,
  sumMoments,
  type Labelled,
  type Projection,
} from './lda';

export interface CvResult {
  /** mean precision@10 of the held-out queries, ranked by plain cosine */
  plain: number;
  /** the same, ranked by the blend */
  tuned: number;
  queries: number;
  /** folds evaluated: a fold whose training part has < 2 labels of MIN_CLASS_ITEMS is skipped */
  folds: number;
  /**
   * The standard error of the gain (tuned − plain), from the queries' own gains: how far the
   * measured gain may be from the dataset's by chance of which items were asked.
   */
  gainError: number;
}

export interface CvOptions {
  weight: number;
  folds?: number;
  seed?: number;
  /** held-out queries per fold */
  maxQueries?: number;
  /** items ranked for each query (a stratified sample of all) */
  maxCorpus?: number;
  /** see FitOptions */
  maxCovItems?: number;
}

const DEFAULT_FOLDS = 5;
/** Queries and corpus bound the ranking's cost (queries × corpus × D) at any dataset size. */
const DEFAULT_MAX_QUERIES = 200;
const DEFAULT_MAX_CORPUS = 5000;
const TOP = 10;

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function shuffle<T>(list: T[], rand: () => number): void {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
}

/**
 * Each item's fold (0 … min(folds, groups) − 1): all items of a group in one fold, so a query's
 * near-copies are never in its fold's training part. Groups go in a seeded order, largest first,
 * each to the fold with the fewest items so far, which keeps the folds' sizes even.
 */
export function assignFolds(groups: readonly string[], folds: number, seed = 1): Int32Array {
  const sizes = new Map<string, number>();
  for (const g of groups) sizes.set(g, (sizes.get(g) ?? 0) + 1);
  const names = [...sizes.keys()].sort(byCodeUnit);
  shuffle(names, seededRandom(seed));
  names.sort((a, b) => sizes.get(b)! - sizes.get(a)!); // stable: equal sizes keep the shuffle
  const load = new Array<number>(Math.max(1, Math.min(folds, names.length))).fill(0);
  const foldOf = new Map<string, number>();
  for (const g of names) {
    let best = 0;
    for (let f = 1; f < load.length; f++) if (load[f]! < load[best]!) best = f;
    foldOf.set(g, best);
    load[best]! += sizes.get(g)!;
  }
  return Int32Array.from(groups, (g) => foldOf.get(g)!);
}

/**
 * At most `max` item indices, ascending, each label keeping its share: items ordered by label
 * (shuffled within it), then every (n / max)-th taken.
 */
function evaluationSample(items: readonly Labelled[], max: number, rand: () => number): Int32Array {
  if (items.length <= max) return Int32Array.from(items, (_, i) => i);
  const byLabel = new Map<string, number[]>();
  items.forEach((it, i) => {
    const list = byLabel.get(it.label);
    if (list) list.push(i);
    else byLabel.set(it.label, [i]);
  });
  const order: number[] = [];
  for (const label of [...byLabel.keys()].sort(byCodeUnit)) {
    const list = byLabel.get(label)!;
    shuffle(list, rand);
    for (const i of list) order.push(i);
  }
  const n = order.length;
  return Int32Array.from(
    { length: max },
    (_, i) => order[Math.floor(((i + 0.5) * n) / max)]!,
  ).sort();
}

/** The share of the TOP best-scored (score desc, then index) with `label`, `skip` left out. */
function hitsAtTop(scores: Float64Array, skip: number, labels: Int32Array, label: number): number {
  const top = Math.min(TOP, scores.length - 1);
  const best = new Float64Array(top).fill(-Infinity);
  const who = new Int32Array(top).fill(-1);
  for (let r = 0; r < scores.length; r++) {
    const s = scores[r]!;
    // ascending r, so an equal score never displaces an earlier item
    if (r === skip || !(s > best[top - 1]!)) continue;
    let i = top - 1;
    for (; i > 0 && best[i - 1]! < s; i--) {
      best[i] = best[i - 1]!;
      who[i] = who[i - 1]!;
    }
    best[i] = s;
    who[i] = r;
  }
  let hits = 0;
  for (let i = 0; i < top; i++) if (who[i]! >= 0 && labels[who[i]!] === label) hits++;
  return hits / top;
}

/**
 * out[r * 8 + q] = Σ_j packed[j * 8 + q] · corpus[r][j]: eight D-vectors (packed interleaved)
 * against every corpus row in one pass, which reads each row once for eight products.
 */
function dots8(
  packed: Float64Array,
  corpus: readonly Float32Array[],
  dims: number,
  out: Float64Array,
): void {
  const q = packed;
  for (let r = 0; r < corpus.length; r++) {
    const x = corpus[r]!;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let s4 = 0;
    let s5 = 0;
    let s6 = 0;
    let s7 = 0;
    for (let j = 0; j < dims; j++) {
      const c = x[j]!;
      const p = j * 8;
      s0 += q[p] * c;
      s1 += q[p + 1] * c;
      s2 += q[p + 2] * c;
      s3 += q[p + 3] * c;
      s4 += q[p + 4] * c;
      s5 += q[p + 5] * c;
      s6 += q[p + 6] * c;
      s7 += q[p + 7] * c;
    }
    const o = r * 8;
    out[o] = s0;
    out[o + 1] = s1;
    out[o + 2] = s2;
    out[o + 3] = s3;
    out[o + 4] = s4;
    out[o + 5] = s5;
    out[o + 6] = s6;
    out[o + 7] = s7;
  }
}

/** Every corpus vector projected by p and L2-normalised, into out (corpus.length × p.k). */
function projectAll(p: Projection, corpus: readonly Float32Array[], out: Float64Array): void {
  const { dims, k, basis, mean } = p;
  const packed = new Float64Array(dims * 8);
  const dots = new Float64Array(corpus.length * 8);
  for (let c0 = 0; c0 < k; c0 += 8) {
    const width = Math.min(8, k - c0);
    const centre = new Float64Array(8);
    packed.fill(0);
    for (let j = 0; j < dims; j++)
      for (let b = 0; b < width; b++) {
        packed[j * 8 + b] = basis[j * k + c0 + b]!;
        centre[b] += mean[j]! * basis[j * k + c0 + b]!;
      }
    // basisᵀ(x − mean) = basisᵀx − basisᵀmean: eight columns at a time, as fast as plain dots
    dots8(packed, corpus, dims, dots);
    for (let r = 0; r < corpus.length; r++)
      for (let b = 0; b < width; b++) out[r * k + c0 + b] = dots[r * 8 + b]! - centre[b]!;
  }
  for (let r = 0; r < corpus.length; r++) {
    let norm = 0;
    for (let c = 0; c < k; c++) norm += out[r * k + c]! ** 2;
    const inv = norm > 0 ? 1 / Math.sqrt(norm) : 0;
    for (let c = 0; c < k; c++) out[r * k + c]! *= inv;
  }
}

/**
 * Mean held-out precision@10, plain and blended with `weight`. Every fold is fitted on the other
 * folds only; its queries (held-out items of a label with MIN_CLASS_ITEMS items) rank the whole
 * evaluation sample but themselves. Items of rarer labels are ranked but never asked, and count
 * as misses: give unlabelled items a label of their own to measure a partly labelled set.
 */
export const crossValidate = (items: readonly Labelled[], opts: CvOptions): CvResult =>
  validate(items, opts, false).cv;

/**
 * crossValidate and fitProjection in one: the whole set's fit comes from the folds' sums, so it
 * costs one factorisation instead of another pass over the items and the scatter sample. The
 * projection is fitProjection's up to the rounding of the sums' order.
 */
export function fitAndValidate(
  items: readonly Labelled[],
  opts: CvOptions,
): { projection: Projection; cv: CvResult } {
  const { cv, projection } = validate(items, opts, true);
  return { projection: projection!, cv };
}

function validate(
  items: readonly Labelled[],
  opts: CvOptions,
  fitAll: boolean,
): { cv: CvResult; projection?: Projection } {
  const { weight, seed = 1 } = opts;
  if (!(weight >= 0 && weight <= 1)) throw new Error('weight must be between 0 and 1');
  const dims = checkDims(items);
  const classes = classesOf(items);
  const sample = covarianceSample(classes, opts.maxCovItems, seed);
  const foldOf = assignFolds(
    items.map((it) => it.group),
    opts.folds ?? DEFAULT_FOLDS,
    seed + 1,
  );
  const folds = foldOf.reduce((n, f) => Math.max(n, f + 1), 0);
  const members = Array.from({ length: folds }, () => [] as number[]);
  foldOf.forEach((f, i) => members[f]!.push(i));
  const perFold = members.map((list, f) =>
    momentsOf(
      items,
      classes,
      list,
      sample.filter((i) => foldOf[i] === f),
    ),
  );
  const train = emptyMoments(dims, classes.names.length);

  const rand = seededRandom(seed + 2);
  const corpus = evaluationSample(items, opts.maxCorpus ?? DEFAULT_MAX_CORPUS, rand);
  const vectors = Array.from(corpus, (i) => items[i]!.vector);
  const labelIds = new Map<string, number>();
  const labels = Int32Array.from(corpus, (i) => {
    const label = items[i]!.label;
    if (!labelIds.has(label)) labelIds.set(label, labelIds.size);
    return labelIds.get(label)!;
  });

  let plain = 0;
  let tuned = 0;
  let gains = 0;
  let gains2 = 0;
  let queries = 0;
  let evaluated = 0;
  const packed = new Float64Array(dims * 8);
  const dots = new Float64Array(corpus.length * 8);
  const scores = new Float64Array(corpus.length);
  for (let f = 0; f < folds; f++) {
    const asked: number[] = [];
    corpus.forEach((i, r) => {
      const c = classes.of[i]!;
      if (foldOf[i] === f && c >= 0 && classes.sizes[c]! >= MIN_CLASS_ITEMS) asked.push(r);
    });
    shuffle(asked, rand);
    asked.length = Math.min(asked.length, opts.maxQueries ?? DEFAULT_MAX_QUERIES);
    asked.sort((a, b) => a - b);

    sumMoments(
      perFold.filter((_, g) => g !== f),
      train,
    );
    let labelled = 0;
    train.count.forEach((n) => n >= MIN_CLASS_ITEMS && labelled++);
    if (asked.length === 0 || labelled < 2) continue;
    const p = fitMoments(
      train,
      items,
      classes,
      sample.filter((i) => foldOf[i] !== f),
    );
    const z = new Float64Array(corpus.length * p.k);
    projectAll(p, vectors, z);

    for (let start = 0; start < asked.length; start += 8) {
      const block = asked.slice(start, start + 8);
      packed.fill(0);
      block.forEach((r, b) => {
        const v = vectors[r]!;
        for (let j = 0; j < dims; j++) packed[j * 8 + b] = v[j]!;
      });
      dots8(packed, vectors, dims, dots);
      block.forEach((q, b) => {
        for (let r = 0; r < corpus.length; r++) scores[r] = dots[r * 8 + b]!;
        const before = hitsAtTop(scores, q, labels, labels[q]!);
        plain += before;
        const zq = z.subarray(q * p.k, (q + 1) * p.k);
        for (let r = 0, o = 0; r < corpus.length; r++, o += p.k) {
          let t = 0;
          for (let c = 0; c < p.k; c++) t += zq[c]! * z[o + c]!;
          scores[r] = blend(weight, scores[r]!, t);
        }
        const after = hitsAtTop(scores, q, labels, labels[q]!);
        tuned += after;
        gains += after - before;
        gains2 += (after - before) ** 2;
      });
      queries += block.length;
    }
    evaluated++;
  }
  const mean = gains / Math.max(1, queries);
  const variance = queries > 1 ? (gains2 - queries * mean * mean) / (queries - 1) : 0;
  const cv =
    queries === 0
      ? { plain: 0, tuned: 0, queries: 0, folds: 0, gainError: 0 }
      : {
          plain: plain / queries,
          tuned: tuned / queries,
          queries,
          folds: evaluated,
          gainError: Math.sqrt(Math.max(0, variance) / queries),
        };
  if (!fitAll) return { cv };
  sumMoments(perFold, train);
  return { cv, projection: fitMoments(train, items, classes, sample) };
}
