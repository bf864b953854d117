import { seededRandom } from '../../lib/seeded-random';
import { Int8Rows } from './int8-rows';
import { slicer } from './slicer';
import type { Matrix } from './vector-cache';

/** Dimensions the vectors are projected to for clustering (cosines kept within about ±0.1). */
const PROJECTED = 64;
/** Clusters probed per query: near copies are close, so they sit in a query's nearest few. */
const PROBES = 12;
/** k-means rounds on the sample. */
const ROUNDS = 4;
/** Rows projected per stretch of the build. */
const PROJECT_BATCH = 8192;

/** A standard normal draw (Box–Muller). */
const gaussian = (r: () => number): number =>
  Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());

function dot(a: Float32Array, ao: number, b: Float32Array, bo: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let j = 0;
  for (; j + 3 < n; j += 4) {
    s0 += a[ao + j]! * b[bo + j]!;
    s1 += a[ao + j + 1]! * b[bo + j + 1]!;
    s2 += a[ao + j + 2]! * b[bo + j + 2]!;
    s3 += a[ao + j + 3]! * b[bo + j + 3]!;
  }
  for (; j < n; j++) s0 += a[ao + j]! * b[bo + j]!;
  return s0 + s1 + (s2 + s3);
}

/** The `count` centroids nearest a projected vector, nearest first. */
function nearest(
  centroids: Float32Array,
  clusters: number,
  v: Float32Array,
  at: number,
  count: number,
): number[] {
  const best: Array<{ c: number; d: number }> = [];
  for (let c = 0; c < clusters; c++) {
    const d = dot(centroids, c * PROJECTED, v, at, PROJECTED);
    if (best.length < count) {
      best.push({ c, d });
      best.sort((x, y) => y.d - x.d);
    } else if (d > best[count - 1]!.d) {
      best[count - 1] = { c, d };
      best.sort((x, y) => y.d - x.d);
    }
  }
  return best.map((b) => b.c);
}

/**
 * Candidate search for the duplicate pass over a dataset's vectors (an inverted file): rows are
 * projected to PROJECTED dimensions by a fixed random map, clustered by k-means on a sample,
 * and each row filed under its nearest cluster. A query compares, in full dimensions, only the
 * rows of its PROBES nearest clusters — about PROBES / clusters of the dataset — so a full pass
 * costs n·√n comparisons instead of n². Near copies (cosine ≥ 0.8) land in a probed cluster;
 * what the probes may miss is measured against the exact scan (docs/engines.md). The index keeps
 * its own copy of the rows' int8 codes, cluster after cluster, scored with SIMD (Int8Rows): a
 * query reads its clusters in sequence.
 */
export class NearIndex {
  private constructor(
    private readonly projected: Float32Array,
    private readonly centroids: Float32Array,
    private readonly clusters: number,
    /** The indexed rows' codes and scales, in cluster order. */
    private readonly codes: Int8Rows,
    private readonly scale: Float32Array,
    /** Per place in cluster order, its matrix row. */
    private readonly rowAt: Int32Array,
    /** Per cluster, where its rows start in cluster order (one entry more, for the end). */
    private readonly starts: Int32Array,
    /** Per matrix row, its place in `rows` order (−1: not indexed). */
    private readonly indexed: Int32Array,
  ) {}

  /** Builds the index over `rows` of `m`, giving the event loop a turn every `pause`. */
  static async build(
    m: Matrix,
    rows: readonly number[],
    pause: () => Promise<void> | undefined = slicer(),
  ): Promise<NearIndex> {
    const n = rows.length;
    // seeded by the data's size: the same vectors give the same index
    const r = seededRandom(n * 2654435761 + m.dims);
    // a Gaussian map scaled so projected unit vectors stay near unit length
    const map = new Float32Array(PROJECTED * m.dims);
    for (let i = 0; i < map.length; i++) map[i] = gaussian(r) / Math.sqrt(PROJECTED);
    const projected = new Float32Array(n * PROJECTED);
    const indexed = new Int32Array(m.pks.length).fill(-1);
    rows.forEach((row, i) => (indexed[row] = i));
    // from the int8 codes (the projection's own error is far larger than theirs), with SIMD
    const list = Int32Array.from(rows);
    for (let p = 0; p < PROJECTED; p++)
      for (let from = 0; from < n; from += PROJECT_BATCH) {
        // loaded and scored in one stretch: a search between slices loads its own query
        const q = m.codes.load(map.subarray(p * m.dims, (p + 1) * m.dims));
        m.codes.gather(list.subarray(from, from + PROJECT_BATCH), (row, score) => {
          projected[indexed[row]! * PROJECTED + p] = score * q.scale * m.scale[row]!;
        });
        await pause();
      }
    const clusters = Math.max(1, Math.min(n, Math.round(Math.sqrt(n) * 1.5)));
    const centroids = new Float32Array(clusters * PROJECTED);
    // k-means++-lite: centroids start at distinct random rows, then a few rounds on a sample
    const order = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (let c = 0; c < clusters; c++)
      centroids.set(
        projected.subarray(order[c]! * PROJECTED, (order[c]! + 1) * PROJECTED),
        c * PROJECTED,
      );
    const sample = order.slice(0, Math.min(n, clusters * 40));
    for (let round = 0; round < ROUNDS; round++) {
      const sums = new Float64Array(clusters * PROJECTED);
      const counts = new Int32Array(clusters);
      for (const i of sample) {
        const c = nearest(centroids, clusters, projected, i * PROJECTED, 1)[0]!;
        counts[c]!++;
        for (let p = 0; p < PROJECTED; p++)
          sums[c * PROJECTED + p]! += projected[i * PROJECTED + p]!;
        await pause();
      }
      // spherical k-means: centroids of unit length, so a dot product ranks them by cosine
      for (let c = 0; c < clusters; c++) {
        if (!counts[c]) continue;
        let norm = 0;
        for (let p = 0; p < PROJECTED; p++) norm += sums[c * PROJECTED + p]! ** 2;
        norm = Math.sqrt(norm) || 1;
        for (let p = 0; p < PROJECTED; p++)
          centroids[c * PROJECTED + p] = sums[c * PROJECTED + p]! / norm;
      }
    }
    const cluster = new Int32Array(n);
    const starts = new Int32Array(clusters + 1);
    for (let i = 0; i < n; i++) {
      cluster[i] = nearest(centroids, clusters, projected, i * PROJECTED, 1)[0]!;
      starts[cluster[i]! + 1]!++;
      await pause();
    }
    for (let c = 0; c < clusters; c++) starts[c + 1]! += starts[c]!;
    const codes = new Int8Rows(n, m.dims);
    const scale = new Float32Array(n);
    const rowAt = new Int32Array(n);
    const next = starts.slice(0, clusters);
    for (let i = 0; i < n; i++) {
      const at = next[cluster[i]!]!++;
      const row = rows[i]!;
      rowAt[at] = row;
      scale[at] = m.scale[row]!;
      codes.set(at, m.codes.codes, row * m.codes.padded);
      await pause();
    }
    return new NearIndex(projected, centroids, clusters, codes, scale, rowAt, starts, indexed);
  }

  /**
   * The rows of the query row's probed clusters that may reach cosine `floor` with `query` (the
   * row's own vector), best first by their int8 score, at most `want` of them plus rows tied
   * with the last; the query row itself is left out. A row is kept when its int8 score plus the
   * most the rounding can hide (Int8Rows.load) reaches the floor, so no row of a probed cluster
   * that reaches it exactly is dropped, except past the `want` best by int8 score (2·k, which
   * held the exact k closest in every measurement, docs/engines.md).
   * `compared` counts the rows scored. Undefined when the row is not indexed.
   */
  near(
    row: number,
    query: Float32Array,
    floor: number,
    want: number,
  ): { rows: number[]; compared: number } | undefined {
    const i = this.indexed[row] ?? -1;
    if (i < 0) return undefined;
    const { codes, scale, rowAt } = this;
    const q = codes.load(query);
    const kept: Array<{ row: number; d: number }> = [];
    let compared = 0;
    const probed = nearest(
      this.centroids,
      this.clusters,
      this.projected,
      i * PROJECTED,
      Math.min(PROBES, this.clusters),
    );
    const visit = (at: number, score: number) => {
      const s = scale[at]!;
      const d = score * q.scale * s;
      if (d + s * q.slack + 1e-6 >= floor && rowAt[at] !== row) kept.push({ row: rowAt[at]!, d });
    };
    for (const c of probed) {
      compared += this.starts[c + 1]! - this.starts[c]!;
      codes.range(this.starts[c]!, this.starts[c + 1]! - this.starts[c]!, visit);
    }
    kept.sort((a, b) => b.d - a.d);
    if (kept.length > want) {
      const last = kept[want - 1]!.d;
      let end = want;
      while (end < kept.length && kept[end]!.d === last) end++;
      kept.length = end;
    }
    return { rows: kept.map((k) => k.row), compared };
  }
}
