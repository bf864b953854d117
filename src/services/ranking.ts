import { mmr, pageOf, similarity, type Discovery } from '../domain/discovery';
import type { GroupSpec } from '../domain/group';
import { project } from '../domain/tuning/lda';
import type { ScoredItem, TunedQuery } from '../ports/search-engine';
import type { Condition } from '../query/ast';
import { nearestGroups, type Nearest, type ScoredGroup } from './similar-groups';
import type { VisionScope, Where } from './vision-scope';

/** Where one similarity request ranks: its query vectors and the items it may return. */
export interface RankingScope {
  embedder: string;
  /** Each item scores its best over these (lens may read several views of one image). */
  vectors: number[][];
  /** The request's conditions (the client's q within the token's scope). */
  where: Where;
  /** The service's own conditions (exclude_parent): applied, not reported. */
  extra: Condition[];
  excludeIds: string[];
  /** best_score collections (contract §15): items at least as near one of these rank last. */
  negatives?: number[][];
  /** The dataset's tuned ranking (contract §20), when active. */
  tuning?: TunedQuery;
}

const withVector = (h: ScoredItem): h is ScoredItem & { vector: number[] } => !!h.vector;

/**
 * The most candidates a best_score collection reads to fill its pages with items it keeps;
 * exhaustive requests read up to the engines' largest exact list.
 */
const STEER_MAX = 2000;
const STEER_MAX_EXACT = 10_000;

/**
 * The `limit` best items over several searches, each item at its best score (equal scores in id
 * order). Each list is that vector's own top `limit`, which holds every item of the fused top
 * `limit` that scores best with that vector, so the union holds the whole fused top.
 */
export function bestOf(lists: ScoredItem[][], limit: number): ScoredItem[] {
  const best = new Map<string, ScoredItem>();
  for (const list of lists)
    for (const h of list) {
      const seen = best.get(h.item.id);
      if (!seen || h.score > seen.score) best.set(h.item.id, h);
    }
  return [...best.values()]
    .sort((a, b) => b.score - a.score || (a.item.id < b.item.id ? -1 : 1))
    .slice(0, limit);
}

/**
 * Ranks a scope as contract §15 asks: exact or approximate, paged, diversified, with a floor.
 * Pages are cut from one ranking; `skip` entries of page 1 are the caller's (similar's target).
 */
export class Ranking {
  constructor(
    private readonly vision: VisionScope,
    private readonly scope: RankingScope,
    private readonly d: Discovery,
    private readonly limit: number,
  ) {}

  /** One engine search of this scope's ranking with one query vector. */
  private ask(
    vector: number[],
    limit: number,
    more: { extra?: Condition[]; excludeIds?: string[]; includeVectors?: boolean; offset?: number },
  ): Promise<ScoredItem[]> {
    const s = this.scope;
    return this.vision.similar(
      s.where,
      {
        vector,
        embedder: s.embedder,
        limit,
        excludeIds: more.excludeIds ?? s.excludeIds,
        includeVectors: more.includeVectors ?? false,
        exact: this.d.exhaustive,
        pageSize: this.limit,
        ...(more.offset ? { offset: more.offset } : {}),
        ...(s.tuning ? { tuning: s.tuning } : {}),
      },
      [...s.extra, ...(more.extra ?? [])],
    );
  }

  /** Nearest items for `limit` candidates; the shape nearestGroups reads. */
  nearest(includeVectors = false): Nearest {
    const s = this.scope;
    const one = (vector: number[], limit: number, extra: Condition[], excludeIds: string[]) =>
      this.ask(vector, limit, { extra, excludeIds, includeVectors });
    return async (limit, extra, excludeIds) =>
      s.vectors.length === 1
        ? one(s.vectors[0]!, limit, extra, excludeIds)
        : bestOf(await Promise.all(s.vectors.map((v) => one(v, limit, extra, excludeIds))), limit);
  }

  /** With `exhaustive`: how many items the request ranks (contract §15 total_results). */
  total(): Promise<number | undefined> {
    if (!this.d.exhaustive) return Promise.resolve(undefined);
    const s = this.scope;
    return this.vision.rankedCount(
      s.where,
      { embedder: s.embedder, excludeIds: s.excludeIds },
      s.extra,
    );
  }

  private get diversified(): boolean {
    return (this.d.diversity ?? 0) > 0;
  }

  /** This request's page of items, best first (or in diversified order). */
  async page(skip = 0): Promise<ScoredItem[]> {
    const depth = this.d.page * this.limit - skip;
    const s = this.scope;
    if (!this.diversified && !s.negatives?.length && s.vectors.length === 1) {
      // one plain ranking: the engine reads only this page's items
      const offset = Math.max(0, depth - this.limit + (this.d.page === 1 ? skip : 0));
      return this.floor(await this.ask(s.vectors[0]!, depth, { offset }));
    }
    const ranking = this.diversified
      ? mmr((await this.candidates(this.d.candidates, true)).filter(withVector), this.d.diversity!)
      : await this.candidates(depth, false);
    return this.floor(pageOf(ranking, this.d.page, this.limit, skip));
  }

  /** The first `n` of the ranking before diversity (with vectors when asked). */
  private candidates(n: number, vectors: boolean): Promise<ScoredItem[]> {
    if (this.scope.negatives?.length) return this.steered(n);
    return this.nearest(vectors)(n, [], this.scope.excludeIds);
  }

  /**
   * best_score (contract §15): items nearer a positive than every negative, best first, then
   * the rest. Candidates are read in growing rounds until `n` such items are found, so pages cut
   * from fewer candidates are a prefix of those cut from more.
   */
  private async steered(n: number): Promise<Array<ScoredItem & { vector: number[] }>> {
    const near = scorer(this.scope.tuning);
    const negatives = this.scope.negatives!.map(near.prepare);
    const max = this.d.exhaustive ? STEER_MAX_EXACT : STEER_MAX;
    for (let k = Math.min(max, Math.max(n * 2, 50)); ; k = Math.min(max, k * 4)) {
      const hits = (await this.nearest(true)(k, [], this.scope.excludeIds)).filter(withVector);
      const kept: typeof hits = [];
      const last: typeof hits = [];
      for (const h of hits) {
        const item = near.prepare(h.vector);
        const away = Math.max(...negatives.map((v) => near.score(v, item)));
        (h.score > away ? kept : last).push(h);
      }
      if (kept.length >= n || hits.length < k || k >= max) return [...kept, ...last].slice(0, n);
    }
  }

  /** The `candidates` nearest items (explore diversifies them its own way). */
  pool(vectors: boolean): Promise<ScoredItem[]> {
    return this.candidates(this.d.candidates, vectors);
  }

  /** The `want` best groups, unpaged (with their best items' vectors when diversifying). */
  groupPool(
    group: GroupSpec,
    want: number,
    excludeKey?: string,
    vectors = true,
  ): Promise<ScoredGroup[]> {
    const s = this.scope;
    return nearestGroups(this.vision, s.where, this.nearest(vectors), {
      want,
      group,
      excludeIds: s.excludeIds,
      ...(excludeKey !== undefined ? { excludeKey } : {}),
    });
  }

  /** Grouped (contract §13): a page of groups, diversified over the groups' best items. */
  async groups(group: GroupSpec, skip = 0, excludeKey?: string): Promise<ScoredGroup[]> {
    if (!this.diversified) {
      const depth = this.d.page * this.limit - skip;
      const found = await this.groupPool(group, depth, excludeKey, false);
      return this.floorGroups(pageOf(found, this.d.page, this.limit, skip));
    }
    const found = await this.groupPool(group, this.d.candidates, excludeKey);
    const heads = found.flatMap((g) => {
      const v = g.hits[0]!.vector;
      return v ? [{ score: g.hits[0]!.score, vector: v, g }] : [];
    });
    const ranking = mmr(heads, this.d.diversity!).map((h) => h.g);
    return this.floorGroups(pageOf(ranking, this.d.page, this.limit, skip));
  }

  floorGroups(groups: ScoredGroup[]): ScoredGroup[] {
    const min = this.d.minScore;
    return min === undefined ? groups : groups.filter((g) => g.hits[0]!.score >= min);
  }

  floor<T extends { score: number }>(hits: T[]): T[] {
    const min = this.d.minScore;
    return min === undefined ? hits : hits.filter((h) => h.score >= min);
  }
}

/**
 * Similarity on the score scale as the request ranks: plain, or tuned (contract §20) with each
 * vector's projection made once.
 */
function scorer(tuning: TunedQuery | undefined) {
  type Prepared = { v: number[]; z?: Float32Array };
  return {
    prepare: (v: number[]): Prepared =>
      tuning ? { v, z: project(tuning.projection, Float32Array.from(v)) } : { v },
    score: (a: Prepared, b: Prepared): number => {
      if (!tuning || !a.z || !b.z) return similarity(a.v, b.v);
      const w = tuning.weight;
      return (
        ((1 - w) * (2 * similarity(a.v, b.v) - 1) + w * (2 * similarity(a.z, b.z) - 1) + 1) / 2
      );
    },
  };
}

/** The mean of unit vectors (each normalised first). */
function meanDirection(vectors: number[][]): number[] {
  const sum = new Array<number>(vectors[0]!.length).fill(0);
  for (const v of vectors) {
    const n = Math.hypot(...v) || 1;
    v.forEach((x, i) => (sum[i]! += x / n / vectors.length));
  }
  return sum;
}

/**
 * centroid (contract §15): mean(positives) + (mean(positives) − mean(negatives)), normalised;
 * without negatives the mean of the positives.
 */
export function centroidQuery(positives: number[][], negatives: number[][]): number[] {
  const p = meanDirection(positives);
  const q = negatives.length
    ? ((n) => p.map((x, i) => 2 * x - n[i]!))(meanDirection(negatives))
    : p;
  const n = Math.hypot(...q) || 1;
  return q.map((x) => x / n);
}
