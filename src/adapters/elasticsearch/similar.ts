import type { RankedSet, ScoredItem, SimilarRequest } from '../../ports/search-engine';
import { docVector, fromDoc, type ItemDoc } from './document';
import {
  MAX_KNN,
  byIdsBody,
  knnBody,
  knnCandidates,
  rangeEndBody,
  rankedCountBody,
  type Dsl,
} from './dsl';
import type { Search } from './groups';

type Hit = { _id?: string; _score?: number | null; _source?: ItemDoc; sort?: unknown[] };
type Hits = { hits: { hits: Hit[]; total?: { value: number } } };

/** Where the next candidate list of a paged ranking comes from, past the first one. */
const SECOND_CANDIDATES = 1000;

const scoreOf = (h: Hit): number => h._score ?? Number(h.sort?.[0] ?? 0);

const toScored = (h: Hit, includeVectors?: boolean): ScoredItem => {
  const vector = includeVectors ? docVector(h._source!) : undefined;
  return { item: fromDoc(h._source!), score: scoreOf(h), ...(vector ? { vector } : {}) };
};

export async function rankedCount(search: Search, set: RankedSet): Promise<number> {
  const r = (await search(rankedCountBody(set))) as Hits;
  return r.hits.total?.value ?? 0;
}

/**
 * Approximate similarity (HNSW). A paged ranking (`pageSize`) deeper than its candidate list
 * continues with a second list that leaves out the first one's items, so each page still cuts
 * one fixed ranking: no repeat, no gap.
 */
export async function approximate(search: Search, req: SimilarRequest): Promise<ScoredItem[]> {
  const candidates = knnCandidates(req);
  const size = Math.min(MAX_KNN, req.limit);
  const from = Math.min(req.offset ?? 0, size);
  if (size <= candidates) {
    const r = (await search(knnBody(req, { candidates, size: size - from, from }))) as Hits;
    return r.hits.hits.map((h) => toScored(h, req.includeVectors));
  }
  const first = (await search(knnBody(req, { candidates, size: candidates }))) as Hits;
  const firstHits = first.hits.hits.map((h) => toScored(h, req.includeVectors));
  const rest = size - firstHits.length;
  if (firstHits.length < candidates || rest <= 0) return firstHits.slice(from);
  const next: SimilarRequest = {
    ...req,
    excludeIds: [...req.excludeIds, ...firstHits.map((h) => h.item.id)],
  };
  const second = (await search(
    knnBody(next, { candidates: Math.max(SECOND_CANDIDATES, rest), size: rest }),
  )) as Hits;
  const secondHits = second.hits.hits.map((h) => toScored(h, req.includeVectors));
  return [...firstHits, ...secondHits].slice(from);
}

/**
 * Exact similarity over every ranked item (contract §15 `exhaustive`). Lucene compares every
 * vector of a segment exactly when the filter leaves it no more documents than the candidates,
 * so up to MAX_KNN items are one kNN query; more are cut into id ranges of MAX_KNN items, each
 * ranked exactly, and the lists merged (score, then id, as every ranking here orders).
 */
export async function exact(search: Search, req: SimilarRequest): Promise<ScoredItem[]> {
  const size = Math.min(MAX_KNN, req.limit);
  const from = Math.min(req.offset ?? 0, size);
  // the same body as the request's total_results count, so a count under way is shared
  const count = await rankedCount(search, req);
  if (count <= MAX_KNN) {
    const r = (await search(
      knnBody(req, { candidates: MAX_KNN, size: size - from, from }),
    )) as Hits;
    return r.hits.hits.map((h) => toScored(h, req.includeVectors));
  }
  const ranges = await idRanges(search, req, count);
  const lists = await Promise.all(
    ranges.map(
      async (extra) =>
        ((await search(knnBody(req, { candidates: MAX_KNN, size, extra, source: false }))) as Hits)
          .hits.hits,
    ),
  );
  const top = lists
    .flat()
    .map((h) => ({ id: String(h.sort?.[1] ?? h._id), score: scoreOf(h) }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(from, size);
  if (!top.length) return [];
  const docs = (await search(
    byIdsBody(
      top.map((t) => t.id),
      req.includeVectors,
    ),
  )) as Hits;
  const byId = new Map(docs.hits.hits.map((h) => [h._source!.id, h]));
  return top.flatMap((t) => {
    const h = byId.get(t.id);
    return h ? [{ ...toScored(h, req.includeVectors), score: t.score }] : [];
  });
}

/**
 * The ranked items cut into id ranges of at most MAX_KNN items each (as filters), so each range
 * is one exact kNN query.
 */
export async function idRanges(search: Search, set: RankedSet, count: number): Promise<Dsl[][]> {
  const ranges: Dsl[][] = [];
  let after: string | undefined;
  for (let left = count; left > 0; left -= MAX_KNN) {
    const end =
      left > MAX_KNN
        ? String(
            ((await search(rangeEndBody(set, after, MAX_KNN))) as Hits).hits.hits[0]?.sort?.[0],
          )
        : undefined;
    ranges.push([
      {
        range: {
          id: {
            ...(after !== undefined ? { gt: after } : {}),
            ...(end !== undefined ? { lte: end } : {}),
          },
        },
      },
    ]);
    if (end === undefined) break;
    after = end;
  }
  return ranges;
}
