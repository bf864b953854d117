import { groupHits, groupKey, groupValue, type GroupSpec } from '../domain/group';
import type { Scalar } from '../domain/metadata';
import type { ScoredItem } from '../ports/search-engine';
import type { Condition } from '../query/ast';
import type { VisionScope, Where } from './vision-scope';

/** The most candidates one grouped similarity request reads (Elasticsearch's largest k). */
const MAX_CANDIDATES = 10_000;

/** One group of similarity hits: its best hit, then up to size − 1 more, all best first. */
export interface ScoredGroup {
  value: Scalar | null;
  count: number;
  hits: ScoredItem[];
}

/** Nearest items under `conditions` for a candidate count and extra exclusions. */
export type Nearest = (
  limit: number,
  extra: Condition[],
  excludeIds: string[],
) => Promise<ScoredItem[]>;

/**
 * The `want` best groups of a nearest-neighbour search (contract §13): candidates are read in
 * growing rounds until `want` groups are found or the candidates run out, so a dataset where one
 * group crowds the top still yields whole pages. A group's further items come from the
 * candidates (the nearest of the group, as every item past them is farther), or, when the
 * candidates were cut short, from a search within the group.
 */
export async function nearestGroups(
  scope: VisionScope,
  where: Where,
  nearest: Nearest,
  p: { want: number; group: GroupSpec; excludeIds: string[]; excludeKey?: string },
): Promise<ScoredGroup[]> {
  const { field, size } = p.group;
  const keyOf = (h: ScoredItem) => groupKey(groupValue(h.item, field));
  let k = Math.min(MAX_CANDIDATES, Math.max(50, p.want * size * 4));
  let hits: ScoredItem[];
  let complete: boolean;
  let groups: Array<{ key: string | undefined; hits: ScoredItem[] }>;
  for (;;) {
    hits = await nearest(k, [], p.excludeIds);
    complete = hits.length < k;
    const usable = p.excludeKey ? hits.filter((h) => keyOf(h) !== p.excludeKey) : hits;
    groups = groupHits(usable, keyOf, size, p.want);
    if (groups.length >= p.want || complete || k >= MAX_CANDIDATES) break;
    k = Math.min(MAX_CANDIDATES, k * 4);
  }
  const keyed = groups.filter((g) => g.key !== undefined);
  const values = keyed.map((g) => groupValue(g.hits[0]!.item, field)!);
  const counts = values.length ? await scope.groupCounts(where, field, values) : [];
  const countOf = new Map(keyed.map((g, i) => [g.key!, counts[i]!]));
  return Promise.all(
    groups.map(async (g) => {
      if (g.key === undefined) return { value: null, count: 1, hits: g.hits };
      const count = countOf.get(g.key)!;
      const value = groupValue(g.hits[0]!.item, field)!;
      if (complete || g.hits.length >= size || g.hits.length >= count)
        return { value, count, hits: g.hits };
      const more = await withinGroup(nearest, field, value, size - g.hits.length, [
        ...p.excludeIds,
        ...g.hits.map((h) => h.item.id),
      ]);
      return { value, count, hits: [...g.hits, ...more] };
    }),
  );
}

/**
 * The nearest `n` items of the group of `value`, leaving out `excludeIds`. The filter matches
 * the value in any form (an array element, a number written as text), so hits of other groups
 * are dropped after the search, and the search widens until `n` remain or none are left.
 */
export async function withinGroup(
  nearest: Nearest,
  field: string,
  value: Scalar,
  n: number,
  excludeIds: string[],
): Promise<ScoredItem[]> {
  if (n <= 0) return [];
  const key = groupKey(value);
  const extra: Condition[] = [{ kind: 'match', field, values: [String(value)] }];
  for (let k = Math.min(MAX_CANDIDATES, n * 4); ; k = Math.min(MAX_CANDIDATES, k * 4)) {
    const found = await nearest(k, extra, excludeIds);
    const mates = found.filter((h) => groupKey(groupValue(h.item, field)) === key);
    if (mates.length >= n || found.length < k || k >= MAX_CANDIDATES) return mates.slice(0, n);
  }
}
