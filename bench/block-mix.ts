/**
 * The hybrid's cosine as a mix of its blocks' cosines (the descriptor's colour, layout and two
 * orientation blocks, and the CNN's features), for exact search over any mix without embedding
 * again: each image's blocks are kept unit length, and a mix's cosine is Σ share × block cosine.
 * bench/similarity-quality.ts searches the shares with it.
 */
import { DESCRIPTOR_BLOCKS } from 'visual-search-service/dist/adapters/embedders/descriptor';
import type { HybridShares } from 'visual-search-service/dist/adapters/embedders';
import { dot } from 'visual-search-service/dist/domain/tuning/linalg';

export const BLOCKS = [
  'colour',
  'layout',
  'orientation',
  'cellOrientation',
  'efficientnet',
] as const satisfies ReadonlyArray<keyof HybridShares>;

/** One image's blocks in BLOCKS order, each unit length (an empty block stays zero). */
export type Blocks = Float32Array[];

function unit(v: Float32Array): Float32Array {
  const n = Math.hypot(...v);
  return n > 0 ? v.map((x) => x / n) : v;
}

export function splitBlocks(descriptor: Float32Array, cnn: Float32Array): Blocks {
  return [
    ...BLOCKS.slice(0, 4).map((b) => {
      const [from, to] = DESCRIPTOR_BLOCKS[b as Exclude<(typeof BLOCKS)[number], 'efficientnet'>];
      return unit(descriptor.slice(from, to));
    }),
    unit(cnn.slice()),
  ];
}

/** Per block, the rows × cols cosines (row-major). */
export function cosines(rows: Blocks[], cols: Blocks[]): Float32Array[] {
  return BLOCKS.map((_, b) => {
    const out = new Float32Array(rows.length * cols.length);
    for (let i = 0; i < rows.length; i++)
      for (let j = 0; j < cols.length; j++)
        out[i * cols.length + j] = dot(rows[i]![b]!, cols[j]![b]!);
    return out;
  });
}

export const sharesVector = (s: HybridShares): number[] => {
  const v = BLOCKS.map((b) => s[b]);
  const total = v.reduce((a, b) => a + b, 0);
  return v.map((x) => x / total);
};

/** Row i of a mix: the cosine of item i with every column. */
function mixedRow(C: Float32Array[], s: number[], cols: number, i: number, out: Float32Array) {
  out.fill(0);
  for (let b = 0; b < C.length; b++) {
    const w = s[b]!;
    if (!w) continue;
    const m = C[b]!;
    for (let j = 0; j < cols; j++) out[j]! += w * m[i * cols + j]!;
  }
}

/** The k best columns of a row but `skip`, best first (insertion into a short list). */
function topOf(row: Float32Array, k: number, skip: number): number[] {
  const top: number[] = [];
  for (let j = 0; j < row.length; j++) {
    if (j === skip) continue;
    if (top.length === k && row[j]! <= row[top[k - 1]!]!) continue;
    let at = Math.min(top.length, k - 1);
    if (top.length < k) top.push(j);
    while (at > 0 && row[top[at - 1]!]! < row[j]!) {
      top[at] = top[at - 1]!;
      at--;
    }
    top[at] = j;
  }
  return top;
}

/** Each item's k nearest others by the mix (exact, leave-one-out), as indices. */
export function exactNeighbours(C: Float32Array[], n: number, s: number[], k: number): number[][] {
  const row = new Float32Array(n);
  const out: number[][] = [];
  for (let i = 0; i < n; i++) {
    mixedRow(C, s, n, i, row);
    out.push(topOf(row, k, i));
  }
  return out;
}

export function precisionAt(labels: string[], C: Float32Array[], s: number[], k: number): number {
  const near = exactNeighbours(C, labels.length, s, k);
  let hits = 0;
  near.forEach((js, i) => (hits += js.filter((j) => labels[j] === labels[i]).length));
  return hits / (labels.length * k);
}

/**
 * Lens R@1: each query view's cosines with the items (`C`, views × items), every item scored
 * by its best view of the query as the service does, and the query right when its best item
 * is the photo it was made from.
 */
export function lensRecall(
  C: Float32Array[],
  owners: number[],
  items: number,
  s: number[],
  right: (query: number, item: number) => boolean,
): number {
  const row = new Float32Array(items);
  const best = new Map<number, Float32Array>();
  owners.forEach((q, v) => {
    mixedRow(C, s, items, v, row);
    const b = best.get(q) ?? best.set(q, new Float32Array(items).fill(-2)).get(q)!;
    for (let j = 0; j < items; j++) if (row[j]! > b[j]!) b[j] = row[j]!;
  });
  let hits = 0;
  for (const [q, b] of best) if (right(q, topOf(b, 1, -1)[0]!)) hits++;
  return hits / best.size;
}

/** Every mix on a grid of `step` whose shares sum to 1. */
export function grid(step: number): HybridShares[] {
  const n = Math.round(1 / step);
  const out: HybridShares[] = [];
  const r = (x: number) => Math.round(x * step * 1000) / 1000;
  for (let c = 0; c <= n; c++)
    for (let l = 0; c + l <= n; l++)
      for (let o = 0; c + l + o <= n; o++)
        for (let q = 0; c + l + o + q <= n; q++)
          out.push({
            colour: r(c),
            layout: r(l),
            orientation: r(o),
            cellOrientation: r(q),
            efficientnet: r(n - c - l - o - q),
          });
  return out;
}

/** The mixes one `step` of share away: taken from one block and given to another. */
export function neighbours(s: HybridShares, step: number): HybridShares[] {
  const out: HybridShares[] = [];
  for (const from of BLOCKS)
    for (const to of BLOCKS) {
      if (from === to || s[from] < step - 1e-9) continue;
      out.push({
        ...s,
        [from]: Math.round((s[from] - step) * 1000) / 1000,
        [to]: Math.round((s[to] + step) * 1000) / 1000,
      });
    }
  return out;
}

export const sharesKey = (s: HybridShares): string => BLOCKS.map((b) => s[b].toFixed(3)).join('/');
