import { invalid } from './errors';
import { LIMITS } from './limits';

/** Contract §15 controls of one similarity request, checked. */
export interface Discovery {
  /** Absent: not asked for (explore then keeps its own diversification). */
  diversity?: number;
  /** How many nearest items maximal marginal relevance chooses from. */
  candidates: number;
  minScore?: number;
  page: number;
  exhaustive: boolean;
}

export interface DiscoveryParams {
  diversity?: number;
  candidates?: number;
  minScore?: number;
  page?: number;
  exhaustive?: boolean;
}

const bad = (param: string, message: string) =>
  invalid(`${param}: ${message}`, [{ param, message }]);

function unit(param: string, v: number | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isFinite(v) || v < 0 || v > 1) throw bad(param, 'a number from 0 to 1');
  return v;
}

/** Checks the §15 parameters against the page size. */
export function checkDiscovery(p: DiscoveryParams, limit: number): Discovery {
  const diversity = unit('diversity', p.diversity);
  const minScore = unit('min_score', p.minScore);
  const max = LIMITS.diversityCandidatesMax;
  const candidates = p.candidates ?? Math.min(max, 4 * limit);
  if (!Number.isInteger(candidates) || candidates < limit || candidates > max)
    throw bad('candidates', `an integer from the limit (${limit}) to ${max}`);
  const page = p.page ?? 1;
  if (!Number.isInteger(page) || page < 1) throw bad('page', 'an integer from 1');
  if (page * limit > LIMITS.similarDepthMax)
    throw bad(
      'page',
      `page × limit is ${page * limit}; similarity results go ${LIMITS.similarDepthMax} deep`,
    );
  return {
    ...(diversity !== undefined ? { diversity } : {}),
    candidates,
    ...(minScore !== undefined ? { minScore } : {}),
    page,
    exhaustive: p.exhaustive ?? false,
  };
}

/** A candidate for maximal marginal relevance: its similarity to the query and its vector. */
export interface Relevant {
  score: number;
  vector: ArrayLike<number>;
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/** Similarity on the score scale: (1 + cosine) / 2 of unit vectors. */
export const similarity = (a: ArrayLike<number>, b: ArrayLike<number>): number =>
  (1 + cosine(a, b)) / 2;

/**
 * Maximal marginal relevance (contract §15): the next item maximises
 * (1 − d) · score − d · max similarity to the items already chosen (none at first), ties going
 * to the earlier candidate. Returns every candidate, in the order chosen; O(n²) similarities,
 * each computed once (n ≤ LIMITS.diversityCandidatesMax).
 */
export function mmr<T extends Relevant>(candidates: readonly T[], diversity: number): T[] {
  const rest = candidates.slice();
  /** Per remaining candidate, its largest similarity to a chosen one (0 while none). */
  const redundancy = new Float64Array(rest.length);
  const out: T[] = [];
  while (rest.length) {
    let best = 0;
    let bestValue = -Infinity;
    for (let i = 0; i < rest.length; i++) {
      const value = (1 - diversity) * rest[i]!.score - diversity * redundancy[i]!;
      if (value > bestValue) {
        bestValue = value;
        best = i;
      }
    }
    const [chosen] = rest.splice(best, 1);
    redundancy.copyWithin(best, best + 1);
    out.push(chosen!);
    for (let i = 0; i < rest.length; i++) {
      const s = similarity(chosen!.vector, rest[i]!.vector);
      if (s > redundancy[i]!) redundancy[i] = s;
    }
  }
  return out;
}

/** The entries of page `page` of a ranking. `skip` leading entries shown before it (similar's target). */
export function pageOf<T>(ranking: readonly T[], page: number, limit: number, skip = 0): T[] {
  const start = (page - 1) * limit - (page > 1 ? skip : 0);
  const end = page * limit - skip;
  return ranking.slice(Math.max(0, start), Math.max(0, end));
}
