/**
 * The embedded engine's vector search keeps int8 codes in memory and rescores candidates from
 * the float32 vectors: its top k must be the brute-force float32 top k, scores included, with
 * exact duplicates (ties at the k-th score) kept together when asked.
 */
import { dot, matrixOf, topK } from '../../src/adapters/embedded/vector-cache';
import { project, type Projection } from '../../src/domain/tuning/lda';
import { seededRandom } from '../../src/lib/seeded-random';

const DIMS = 64;

function clustered(n: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const unit = (v: Float32Array) => {
    const s = Math.hypot(...v);
    return v.map((x) => x / s);
  };
  const themes = Array.from({ length: 12 }, () =>
    unit(Float32Array.from({ length: DIMS }, () => r() - 0.5)),
  );
  const data = new Float32Array(n * DIMS);
  for (let i = 0; i < n; i++) {
    // every 25th row repeats the one before it exactly: ties at any rank
    const v =
      i % 25 === 1
        ? data.slice((i - 1) * DIMS, i * DIMS)
        : unit(themes[Math.floor(r() * themes.length)]!.map((x) => x + (r() - 0.5) * 0.3));
    data.set(v, i * DIMS);
  }
  return data;
}

const order = (a: { row: number; d: number }, b: { row: number; d: number }) =>
  b.d - a.d || a.row - b.row;

test.each([1, 10, 50, 200])('top %i equals brute force over float32, ties included', (k) => {
  const n = 3000;
  const data = clustered(n, k);
  const m = matrixOf(data, DIMS);
  const r = seededRandom(100 + k);
  for (let q = 0; q < 40; q++) {
    const at = Math.floor(r() * n);
    const query = data.slice(at * DIMS, (at + 1) * DIMS);
    const skip = new Set([at]);
    const all = Array.from({ length: n }, (_, row) => ({
      row,
      d: dot(query, data.subarray(row * DIMS, (row + 1) * DIMS)),
    }))
      .filter((x) => !skip.has(x.row))
      .sort(order);
    const kth = all[k - 1]!.d;
    const want = all.filter((x, i) => i < k || x.d === kth);
    expect(topK(m, query, k, undefined, skip, true).sort(order)).toEqual(want);
    const plain = topK(m, query, k, undefined, skip);
    expect(plain).toHaveLength(k);
    expect(plain.map((x) => x.d)).toEqual(all.slice(0, k).map((x) => x.d));
  }
});

test.each([1, 10, 50])(
  'tuned (contract §20): top %i equals brute force over the blend of float32 cosines',
  (k) => {
    const n = 3000;
    const data = clustered(n, 7 + k);
    const r = seededRandom(300 + k);
    const projection: Projection = {
      dims: DIMS,
      k: 5,
      mean: Float32Array.from({ length: DIMS }, () => (r() - 0.5) * 0.05),
      basis: Float32Array.from({ length: DIMS * 5 }, () => r() - 0.5),
    };
    const m = matrixOf(data, DIMS, { model: 'm', projection });
    const zs = Array.from({ length: n }, (_, row) =>
      project(projection, data.subarray(row * DIMS, (row + 1) * DIMS)),
    );
    for (const weight of [0, 0.75, 1])
      for (let q = 0; q < 20; q++) {
        const at = Math.floor(r() * n);
        const query = data.slice(at * DIMS, (at + 1) * DIMS);
        const zq = project(projection, query);
        const all = Array.from({ length: n }, (_, row) => ({
          row,
          d:
            (1 - weight) * dot(query, data.subarray(row * DIMS, (row + 1) * DIMS)) +
            weight * dot(zq, zs[row]!),
        }))
          .filter((x) => x.row !== at)
          .sort(order);
        const got = topK(m, query, k, undefined, new Set([at]), false, { weight });
        expect(got.map((x) => x.row)).toEqual(all.slice(0, k).map((x) => x.row));
        got.forEach((x, i) => expect(x.d).toBeCloseTo(all[i]!.d, 6));
      }
  },
);
