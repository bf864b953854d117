/**
 * A brute-force model of contract §15 (discovery controls) for the end-to-end tests: the
 * service's own analyzer turns the very bytes a test serves into the vector the worker stores
 * (float32), and the rankings, centroids, best-score tiers and maximal-marginal-relevance steps
 * are recomputed from those vectors, independently of the service's code.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';

/** What the test app's EMBEDDER=descriptor stores for an image (the store keeps float32). */
const analyzer = new SharpImageAnalyzer(new DescriptorEmbedder());
export async function vectorOf(bytes: Uint8Array): Promise<Float32Array> {
  return Float32Array.from((await analyzer.analyze(bytes)).vector);
}

const dot = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};
/** Similarity on the score scale of the wire: (1 + cosine) / 2 of unit vectors. */
export const sim = (a: ArrayLike<number>, b: ArrayLike<number>): number => (1 + dot(a, b)) / 2;

function normalise(v: ArrayLike<number>): Float64Array {
  const n = Math.sqrt(dot(v, v));
  return Float64Array.from(v, (x) => x / n);
}
function mean(vs: ReadonlyArray<ArrayLike<number>>): Float64Array {
  const out = new Float64Array(vs[0]!.length);
  for (const v of vs) for (let i = 0; i < out.length; i++) out[i]! += v[i]! / vs.length;
  return out;
}
/** §15 centroid: normalise(2·mean(P) − mean(N)); without negatives the mean of the positives. */
export function centroid(
  pos: ReadonlyArray<ArrayLike<number>>,
  neg: ReadonlyArray<ArrayLike<number>>,
): Float64Array {
  const p = mean(pos);
  if (!neg.length) return normalise(p);
  const n = mean(neg);
  return normalise(p.map((x, i) => 2 * x - n[i]!));
}

/**
 * Class pictures for the labelled catalogue: one background colour per class (shaded a little
 * per item) with a white disc moved about, so that a class's pictures are nearer each other
 * (cosine ≥ 0.8) than any picture of another class (≤ 0.65).
 */
const PALETTE: Array<[number, number, number]> = [
  [200, 30, 30],
  [30, 160, 40],
  [40, 60, 210],
  [230, 200, 20],
  [150, 40, 170],
  [20, 180, 190],
];
export const CLASS_COUNT = PALETTE.length;
export function classImage(c: number, k: number): Promise<Buffer> {
  const [r, g, b] = PALETTE[c]!;
  const d = ((k * 37) % 21) - 10;
  const svg =
    `<svg width="48" height="48"><rect width="100%" height="100%" fill="rgb(${r + d},${g + d},${b + d})"/>` +
    `<circle cx="${((k * 13) % 40) + 4}" cy="${((k * 7) % 40) + 4}" r="${4 + (k % 5)}" fill="white"/></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** Serves fixed bytes by path (a query string is ignored: copies of a picture share bytes). */
export async function serveBytes(
  files: ReadonlyMap<string, Buffer>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const body = files.get(new URL(req.url ?? '/', 'http://x').pathname);
    if (!body) {
      res.writeHead(404);
      return res.end('not here');
    }
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Scores on the wire are rounded to 6 decimals; vectors are float32: this much either way. */
export const TOL = 2e-6;

/**
 * An item a ranking may return: its score as the model computes it, and the values it may be
 * sorted by (more than one when the model cannot tell, e.g. a best_score candidate whose best
 * positive and best negative are equally near).
 */
export interface Expected {
  id: string;
  score: number;
  keys: number[];
}

export interface Entry {
  id: string;
  score: number;
}

/**
 * Everything wrong with `got` as the first entries of the ranking of `eligible` by `keys`
 * (descending), `want` entries asked for: unknown or repeated ids, scores other than the model's,
 * order, an item passed over for a worse one, a short or long answer. Items whose keys tie
 * within TOL may come in either order. Empty when `got` is right.
 */
export function rankingProblems(
  got: readonly Entry[],
  eligible: readonly Expected[],
  want: number,
): string[] {
  const out: string[] = [];
  const byId = new Map(eligible.map((e) => [e.id, e]));
  const seen = new Set<string>();
  const hi = (e: Expected) => Math.max(...e.keys);
  const lo = (e: Expected) => Math.min(...e.keys);
  const rows: Expected[] = [];
  for (const [i, g] of got.entries()) {
    const e = byId.get(g.id);
    if (seen.has(g.id)) out.push(`#${i} ${g.id} repeated`);
    seen.add(g.id);
    if (!e) {
      out.push(`#${i} ${g.id} is not eligible (filtered out, an input, or unknown)`);
      continue;
    }
    if (Math.abs(g.score - e.score) > TOL)
      out.push(`#${i} ${g.id} score ${g.score}, model ${e.score.toFixed(7)}`);
    rows.push(e);
  }
  for (let i = 0; i < rows.length; i++)
    for (let j = i + 1; j < rows.length; j++)
      if (hi(rows[i]!) < lo(rows[j]!) - TOL)
        out.push(
          `${rows[i]!.id} (${hi(rows[i]!).toFixed(7)}) ranked before better ${rows[j]!.id} (${lo(rows[j]!).toFixed(7)})`,
        );
  const worst = rows.length ? Math.min(...rows.map(hi)) : Infinity;
  const passedOver = eligible.filter((e) => !seen.has(e.id) && lo(e) > worst + TOL);
  if (got.length === want && passedOver.length)
    out.push(
      `passed over ${passedOver
        .slice(0, 5)
        .map((e) => `${e.id} (${lo(e).toFixed(7)})`)
        .join(', ')} for a worse item (${worst.toFixed(7)})`,
    );
  const length = Math.min(want, eligible.length);
  if (got.length !== length) out.push(`${got.length} entries, the model has ${length}`);
  return out.length > 12 ? [...out.slice(0, 12), `… ${out.length - 12} more`] : out;
}

/** The items ranked by similarity to `query` (score and key alike). */
export function bySimilarity(
  items: ReadonlyArray<{ id: string; vec: ArrayLike<number> }>,
  query: ArrayLike<number>,
): Expected[] {
  return items
    .map((x) => {
      const score = sim(query, x.vec);
      return { id: x.id, score, keys: [score] };
    })
    .sort((a, b) => b.score - a.score);
}

/**
 * §15 best_score: a candidate's score is its best similarity to a positive; when that does not
 * beat its best similarity to a negative it ranks below every candidate where it does.
 */
export function byBestScore(
  items: ReadonlyArray<{ id: string; vec: ArrayLike<number> }>,
  pos: ReadonlyArray<ArrayLike<number>>,
  neg: ReadonlyArray<ArrayLike<number>>,
): Array<Expected & { demoted: boolean | undefined }> {
  const DEMOTE = 10;
  return items
    .map((x) => {
      const p = Math.max(...pos.map((v) => sim(v, x.vec)));
      const n = neg.length ? Math.max(...neg.map((v) => sim(v, x.vec))) : -Infinity;
      // float32 vectors: a near-tie between the best positive and best negative can go either way
      const demoted = Math.abs(p - n) <= 1e-6 ? undefined : p <= n;
      const keys = demoted === undefined ? [p, p - DEMOTE] : demoted ? [p - DEMOTE] : [p];
      return { id: x.id, score: p, keys, demoted };
    })
    .sort((a, b) => Math.max(...b.keys) - Math.max(...a.keys));
}

export interface PoolItem {
  id: string;
  /** Similarity to the query, score scale. */
  score: number;
  vec: ArrayLike<number>;
}

/**
 * Replays the §15 greedy choice over `pool` (ordered best first) along the service's answer
 * `got`: at each step the item it chose must maximise
 * (1 − d)·sim(query, x) − d·max sim(x, chosen) (chosen starting empty) within 1e-5 (float32
 * vectors and 6-decimal scores leave the order of near-ties to the service). Returns what is
 * wrong.
 */
export function mmrProblems(
  got: readonly string[],
  pool: readonly PoolItem[],
  d: number,
): string[] {
  const out: string[] = [];
  const rest = pool.slice();
  const redundancy = new Map<string, number>();
  for (const [step, id] of got.entries()) {
    const values = rest.map((x) => (1 - d) * x.score - d * (redundancy.get(x.id) ?? 0));
    const best = Math.max(...values);
    const at = rest.findIndex((x) => x.id === id);
    if (at < 0) {
      out.push(`step ${step}: ${id} is not a remaining candidate`);
      break;
    }
    const first = values.findIndex((v) => v >= best - 1e-9);
    if (values[at]! < best - 1e-5)
      out.push(
        `step ${step}: chose ${id} (${values[at]!.toFixed(6)}), ${rest[first]!.id} has ${best.toFixed(6)}`,
      );
    const [chosen] = rest.splice(at, 1);
    for (const x of rest) {
      const s = sim(chosen!.vec, x.vec);
      if (s > (redundancy.get(x.id) ?? 0)) redundancy.set(x.id, s);
    }
  }
  return out;
}

/** The largest similarity between two of `vecs` (the closest pair). */
export function closestPair(vecs: ReadonlyArray<ArrayLike<number>>): number {
  let best = -Infinity;
  for (let i = 0; i < vecs.length; i++)
    for (let j = i + 1; j < vecs.length; j++) best = Math.max(best, sim(vecs[i]!, vecs[j]!));
  return best;
}
