/**
 * The SIMD int8 kernel (Int8Rows, int8-dot.wat): integer scores equal the products of the codes
 * computed in JavaScript, in both access orders, for any width (padding included); and the
 * scaled score is within the promised slack of the exact float dot product.
 */
import fc from 'fast-check';
import { Int8Rows } from '../../src/adapters/embedded/int8-rows';

const vector = (dims: number) =>
  fc.array(fc.float({ min: -1, max: 1, noNaN: true, noDefaultInfinity: true }), {
    minLength: dims,
    maxLength: dims,
  });

test('scores equal the integer products, and the scaled score is within the slack', () => {
  fc.assert(
    fc.property(
      fc
        .integer({ min: 1, max: 70 })
        .chain((dims) =>
          fc.tuple(
            fc.constant(dims),
            vector(dims),
            fc.array(vector(dims), { minLength: 1, maxLength: 9 }),
          ),
        ),
      ([dims, query, vectors]) => {
        const rows = new Int8Rows(vectors.length, dims);
        const scales = vectors.map((v, r) => {
          const s = Math.max(...v.map(Math.abs)) / 127 || 1;
          rows.set(
            r,
            Int8Array.from(v, (x) => Math.round(x / s)),
            0,
          );
          return s;
        });
        const q = rows.load(query);
        const expected = (r: number) => {
          let sum = 0;
          for (let j = 0; j < dims; j++)
            sum += Math.round(query[j]! / q.scale) * rows.codes[r * rows.padded + j]!;
          return sum;
        };
        const seen: Array<[number, number]> = [];
        rows.range(0, vectors.length, (r, score) => seen.push([r, score]));
        expect(seen).toEqual(vectors.map((_, r) => [r, expected(r)]));
        const order = vectors.map((_, r) => vectors.length - 1 - r);
        const gathered: Array<[number, number]> = [];
        rows.gather(order, (r, score) => gathered.push([r, score]));
        expect(gathered).toEqual(order.map((r) => [r, expected(r)]));
        for (const [r, score] of seen) {
          const exact = vectors[r]!.reduce((s, x, j) => s + x * query[j]!, 0);
          expect(Math.abs(score * q.scale * scales[r]! - exact)).toBeLessThanOrEqual(
            scales[r]! * q.slack + 1e-9,
          );
        }
      },
    ),
  );
});

test('a range longer than one call of the kernel is scored whole', () => {
  const dims = 20;
  const n = 9000;
  const rows = new Int8Rows(n, dims);
  for (let r = 0; r < n; r++)
    rows.set(
      r,
      Int8Array.from({ length: dims }, (_, j) => ((r + j) % 255) - 127),
      0,
    );
  rows.load(Float32Array.from({ length: dims }, (_, j) => (j % 2 ? 1 : -1)));
  const scores = new Map<number, number>();
  rows.range(0, n, (r, s) => scores.set(r, s));
  expect(scores.size).toBe(n);
  const q = rows.load(Float32Array.from({ length: dims }, (_, j) => (j % 2 ? 1 : -1)));
  for (const r of [0, 4095, 4096, 8191, 8192, n - 1]) {
    let sum = 0;
    for (let j = 0; j < dims; j++) sum += (j % 2 ? 1 : -1) * (((r + j) % 255) - 127);
    expect(scores.get(r)! * q.scale).toBeCloseTo(sum, 3);
  }
});

test('the slack covers the query rounding at its worst: every dimension half a step off', () => {
  // a row stored without rounding and a query whose every small part rounds to zero: the
  // integer score misses all of them, which only the query's share of the slack covers
  const dims = 1420;
  const rows = new Int8Rows(1, dims);
  rows.set(
    0,
    Int8Array.from({ length: dims }, (_, j) => (j ? 127 : 0)),
    0,
  );
  const s = 1 / 127;
  const probe = rows.load(Float32Array.from({ length: dims }, (_, j) => (j ? 0 : 1)));
  const query = Float32Array.from({ length: dims }, (_, j) => (j ? probe.scale * 0.4999 : 1));
  const q = rows.load(query);
  let score = 0;
  rows.range(0, 1, (_, sc) => (score = sc));
  expect(score).toBe(0);
  const exact = query.reduce((sum, x, j) => sum + x * (j ? 1 : 0), 0);
  expect(exact).toBeGreaterThan(s * 5);
  expect(Math.abs(score * q.scale * s - exact)).toBeLessThanOrEqual(s * q.slack);
});

test('the largest products stay exact: full rows against a constant query, at any width', () => {
  for (const dims of [1420, 1424, 1425, 4096]) {
    const rows = new Int8Rows(2, dims);
    rows.set(0, new Int8Array(dims).fill(127), 0);
    rows.set(1, new Int8Array(dims).fill(-127), 0);
    const q = rows.load(new Float32Array(dims).fill(0.5));
    const qmax = Math.round(0.5 / q.scale);
    const scores: number[] = [];
    rows.range(0, 2, (_, s) => scores.push(s));
    // every query code at its largest: the sum is the largest the kernel can meet
    expect(scores).toEqual([qmax * 127 * dims, -qmax * 127 * dims]);
    expect(qmax * 127 * dims).toBeLessThan(2 ** 31);
    expect(qmax).toBeGreaterThan(8000 * (1424 / Math.max(dims, 1424)));
  }
});

/** fround(max / 127), or the next float32 up while the largest code would pass 127.5. */
function scaleOf(max: number): number {
  const f = new Float32Array(1);
  const bits = new Int32Array(f.buffer);
  f[0] = max / 127;
  while (max / f[0]! > 127.5) bits[0]!++;
  return f[0] || 1;
}

test('quantise: the scale maps the largest magnitude to 127, every code within half a step', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 70 }).chain((dims) =>
        fc.tuple(
          fc.constant(dims),
          fc.array(
            fc.oneof(
              vector(dims),
              fc.constant(Array<number>(dims).fill(0)),
              // large and tiny magnitudes, where the float32 scale rounds most
              vector(dims).map((v) => v.map((x) => x * 1e6)),
              vector(dims).map((v) => v.map((x) => x * 1e-30)),
            ),
            { minLength: 1, maxLength: 5 },
          ),
        ),
      ),
      ([dims, vectors]) => {
        const rows = new Int8Rows(vectors.length + 2, dims);
        // the rows around the written ones are filled first: quantise must leave them alone
        rows.codes.fill(99);
        const scales = vectors.map((v, r) => rows.quantise(r + 1, Float32Array.from(v)));
        return (
          vectors.every((v, r) => {
            const max = Math.max(...v.map((x) => Math.abs(Math.fround(x))));
            const s = scales[r]!;
            if (s !== scaleOf(max)) return false;
            const at = (r + 1) * rows.padded;
            const codes = rows.codes.subarray(at, at + rows.padded);
            return (
              v.every((x, j) => Math.abs(Math.fround(x) / s - codes[j]!) <= 0.5) &&
              codes.subarray(dims).every((c) => c === 0)
            );
          }) &&
          rows.codes.subarray(0, rows.padded).every((c) => c === 99) &&
          rows.codes.subarray((vectors.length + 1) * rows.padded).every((c) => c === 99)
        );
      },
    ),
  );
});
