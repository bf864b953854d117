import { LIMITS } from '../../domain/limits';
import type { SimilarityResult } from '../../services/similarity';
import { toVisionItem } from './map';
import type { ResultGroup } from './types/search';
import type { PagedSimilarityArgs, SimilarityArgs, SimilarityPage } from './types/similarity';
import type { Vision, VisionItem } from './types/vision';

/** A result with its group, which `VisionItem.group` resolves (absent without group). */
export type Grouped = VisionItem & { groupView?: ResultGroup };

export const withGroup = (
  first: VisionItem,
  g: { value: ResultGroup['value']; count: number },
  more: VisionItem[],
  size: number,
): Grouped =>
  Object.assign(first, {
    groupView: { value: g.value, count: g.count, ...(size > 1 ? { items: more } : {}) },
  });

/** Similarity hits as Vision items; explore_url carries q, limit (and the journey). */
export function scored(
  baseUrl: string,
  vis: Vision,
  r: SimilarityResult,
  carry: { q?: string; limit: number; path?: string[]; group?: string; groupSize?: number },
): VisionItem[] {
  const link = { baseUrl, org: vis.org, dataset: vis.dataset, carry };
  const one = (h: SimilarityResult['hits'][number]) => toVisionItem(h.item, link, h.score);
  return r.hits.map((h) =>
    h.group ? withGroup(one(h), h.group, h.group.more.map(one), r.groupSize ?? 1) : one(h),
  );
}

/** The service's view of the common similarity arguments (GraphQL gives absent ones as null). */
export const similarity = (a: SimilarityArgs & Partial<Pick<PagedSimilarityArgs, 'page'>>) => ({
  limit: a.limit,
  q: a.q ?? undefined,
  v: a.v ?? undefined,
  ...(a.group ? { group: { field: a.group.field, size: a.group.size } } : {}),
  diversity: a.diversity ?? undefined,
  candidates: a.candidates ?? undefined,
  minScore: a.minScore ?? undefined,
  exhaustive: a.exhaustive ?? undefined,
  page: a.page ?? undefined,
});

/** What a similarity result's explore_url carries over. */
export const carried = (a: SimilarityArgs) => ({
  q: a.q ?? undefined,
  limit: a.limit,
  ...(a.group ? { group: a.group.field, groupSize: a.group.size } : {}),
});

/**
 * A page of results with its place (contract §15). A next page may exist while this one is full,
 * the 1,000-result depth is not reached and, when counted, ranked items remain; `skip` entries
 * of page 1 are not ranked results (similar's target).
 */
export function similarityPage(
  r: SimilarityResult,
  results: VisionItem[],
  skip = 0,
): SimilarityPage {
  const shown = r.page * r.limit;
  return {
    results,
    page: r.page,
    limit: r.limit,
    ...(r.total !== undefined ? { totalResults: r.total } : {}),
    hasNextPage:
      r.hits.length >= r.limit &&
      shown < LIMITS.similarDepthMax &&
      (r.total === undefined || shown - skip < r.total),
  };
}
