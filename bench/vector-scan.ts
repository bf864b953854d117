/**
 * The embedded engine's vector scan, side by side in one run: the SIMD kernel (Int8Rows, as the
 * engine runs it) against the same int8 products in a JavaScript loop (the engine's scan before
 * the kernel, four running sums) and against float32 (the engine's `dot` on each row), over
 * the first BENCH_ITEMS (100,000) real vectors of bench/real-vectors.ts. Rounds interleave the three (A B C, C B A, …)
 * on the same queries; each round reports ms per query for a full scan and for a scan of a
 * tenth of the rows (a filter), and the file the median of the rounds. The engine's topK
 * answers are checked against exact float32 brute force on every query (top 10).
 *
 *   npm run bench:vector-scan   (BENCH_ITEMS (100000), BENCH_QUERIES (50), BENCH_ROUNDS (3))
 */
import { execFileSync } from 'node:child_process';
import { dot, matrixOf, topK } from 'visual-search-service/dist/adapters/embedded/vector-cache';
import { machine, median, writeResult } from './common';
import { loadRealVectors } from './real-vectors';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** The int8 loop the kernel replaced: codes × float query, four running sums. */
function jsInt8(codes: Int8Array, dims: number, q: Float32Array, rows: ArrayLike<number>): number {
  let best = -Infinity;
  const tail = dims - (dims % 4);
  for (let i = 0; i < rows.length; i++) {
    const o = rows[i]! * dims;
    let d0 = 0;
    let d1 = 0;
    let d2 = 0;
    let d3 = 0;
    let j = 0;
    for (; j < tail; j += 4) {
      d0 += q[j]! * codes[o + j]!;
      d1 += q[j + 1]! * codes[o + j + 1]!;
      d2 += q[j + 2]! * codes[o + j + 2]!;
      d3 += q[j + 3]! * codes[o + j + 3]!;
    }
    for (; j < dims; j++) d0 += q[j]! * codes[o + j]!;
    best = Math.max(best, d0 + d1 + (d2 + d3));
  }
  return best;
}

/** Float32 as the engine scored before int8: its `dot` on each row (a view of the row). */
function jsFloat(
  data: Float32Array,
  dims: number,
  q: Float32Array,
  rows: ArrayLike<number>,
): number {
  let best = -Infinity;
  for (let i = 0; i < rows.length; i++)
    best = Math.max(best, dot(q, data.subarray(rows[i]! * dims, (rows[i]! + 1) * dims)));
  return best;
}

async function main(): Promise<void> {
  const { data, dims } = await loadRealVectors(ITEMS);
  const m = matrixOf(data, dims);
  // the JavaScript loops' own packed copy of the same codes
  const packed = new Int8Array(ITEMS * dims);
  for (let r = 0; r < ITEMS; r++)
    packed.set(m.codes.codes.subarray(r * m.codes.padded, r * m.codes.padded + dims), r * dims);
  const all = Int32Array.from({ length: ITEMS }, (_, i) => i);
  const tenth = Int32Array.from({ length: Math.floor(ITEMS / 10) }, (_, i) => i * 10);
  const queries = Array.from({ length: QUERIES }, (_, i) =>
    Math.floor(((i + 0.5) * ITEMS) / QUERIES),
  );
  const query = (r: number) => data.subarray(r * dims, (r + 1) * dims);
  const kernel = (rows: Int32Array) => {
    let best = -Infinity;
    for (const r of queries) {
      m.codes.load(query(r));
      m.codes.gather(rows, (_, s) => (best = Math.max(best, s)));
    }
    return best;
  };
  const ways: Record<string, (rows: Int32Array) => number> = {
    simd_int8: kernel,
    js_int8: (rows) =>
      queries.reduce((b, r) => Math.max(b, jsInt8(packed, dims, query(r), rows)), 0),
    js_float32: (rows) =>
      queries.reduce((b, r) => Math.max(b, jsFloat(data, dims, query(r), rows)), 0),
  };
  const names = Object.keys(ways);
  const rounds: Array<Record<string, { full_ms: number; tenth_ms: number }>> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...names].reverse() : names;
    const result: Record<string, { full_ms: number; tenth_ms: number }> = {};
    for (const name of order) {
      const time = (rows: Int32Array) => {
        const t = performance.now();
        ways[name]!(rows);
        return (performance.now() - t) / QUERIES;
      };
      result[name] = { full_ms: time(all), tenth_ms: time(tenth) };
    }
    rounds.push(result);
    console.log(`round ${round + 1}`, JSON.stringify(result));
  }
  // the engine's answers: topK's scores equal float32 brute force's top 10 (ties either way)
  let same = 0;
  for (const r of queries) {
    const q = query(r);
    const dotAt = (row: number) => {
      let d = 0;
      for (let j = 0; j < dims; j++) d += q[j]! * data[row * dims + j]!;
      return d;
    };
    const got = topK(m, q, 10, undefined, new Set()).map((t) => dotAt(t.row));
    const exact = Array.from(all, dotAt)
      .sort((a, b) => b - a)
      .slice(0, 10);
    if (got.length === 10 && got.every((d, i) => d === exact[i])) same++;
  }
  const summary = Object.fromEntries(
    names.map((n) => [
      n,
      {
        full_ms: median(rounds.map((x) => x[n]!.full_ms)),
        tenth_ms: median(rounds.map((x) => x[n]!.tenth_ms)),
      },
    ]),
  );
  const file = writeResult('vector-scan', {
    date: new Date().toISOString(),
    commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(),
    machine: machine(),
    items: ITEMS,
    dimensions: dims,
    queries: QUERIES,
    rounds,
    median: summary,
    simd_speedup_over_js_int8: {
      full: summary.js_int8!.full_ms / summary.simd_int8!.full_ms,
      tenth: summary.js_int8!.tenth_ms / summary.simd_int8!.tenth_ms,
    },
    top10_exact_queries: `${same}/${QUERIES}`,
    bytes_per_row: { simd_int8: m.codes.padded, js_int8: dims, js_float32: dims * 4 },
  });
  console.log(JSON.stringify(summary), `top-10 exact ${same}/${QUERIES}`);
  console.log(`written to ${file}`);
}

void main();
