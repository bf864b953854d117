import { invalid } from './errors';

/** How many earlier selections an explore journey remembers (carried in explore_url). */
const JOURNEY_MAX = 5;

/** The journey's earlier selections, newest last; unknown ids are ignored later. */
export function checkJourney(ids: readonly string[]): string[] {
  if (ids.some((id) => id === '' || id.length > 100))
    throw invalid('path holds an empty or over-long id', [
      { param: 'path', message: 'ids are 1–100 characters' },
    ]);
  return ids.slice(-JOURNEY_MAX);
}

/**
 * The query for the next explore step: the selected item, steered by the earlier ones with
 * weights halving per step back, normalised.
 */
export function steer(current: number[], earlier: number[][]): number[] {
  const q = current.slice();
  earlier
    .slice()
    .reverse()
    .forEach((v, i) => {
      const w = 0.5 ** (i + 1);
      for (let k = 0; k < q.length; k++) q[k]! += w * v[k]!;
    });
  const n = Math.hypot(...q);
  return n > 0 ? q.map((x) => x / n) : q;
}

/** Cosine at or above which two images count as the same picture. */
const DUPLICATE_COSINE = 0.995;

/**
 * Maximal marginal relevance: pick `k` of the candidates (best first by relevance), trading
 * relevance to the query against similarity to what is already on the page, so near-duplicates
 * do not fill it. Candidates that are the same picture as one in `seen` (the selected item) or
 * as one already picked are used only when nothing else is left. `lambda` 1 is pure relevance.
 */
export function diversify<T extends { score: number; vector: number[] }>(
  candidates: T[],
  k: number,
  lambda = 0.7,
  seen: number[][] = [],
): T[] {
  const cos = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);
  const picked: T[] = [];
  const shown = [...seen];
  const rest = candidates.slice();
  while (picked.length < k && rest.length) {
    let best = -1;
    let bestValue = -Infinity;
    let fallback = -1;
    rest.forEach((c, i) => {
      const redundancy = shown.length ? Math.max(...shown.map((v) => cos(v, c.vector))) : 0;
      if (redundancy >= DUPLICATE_COSINE) {
        if (fallback < 0) fallback = i;
        return;
      }
      // score is (1 + cosine) / 2; compare on the cosine scale
      const value = lambda * (2 * c.score - 1) - (1 - lambda) * Math.max(0, redundancy);
      if (value > bestValue) {
        bestValue = value;
        best = i;
      }
    });
    const chosen = rest.splice(best >= 0 ? best : fallback, 1)[0]!;
    picked.push(chosen);
    shown.push(chosen.vector);
  }
  return picked;
}
