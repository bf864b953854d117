import { errors } from '@elastic/elasticsearch';
import { blend, blendQueryVector, project } from '../../domain/tuning/lda';
import { dot } from '../../domain/tuning/linalg';
import type { ScoredItem, SimilarRequest, TunedQuery } from '../../ports/search-engine';
import {
  EMBEDDING_SOURCE,
  blendField,
  docFloats,
  fromDoc,
  vectorField,
  type ItemDoc,
} from './document';
import { MAX_KNN, NO_VECTOR, knnCandidates, rankedFilter, type Dsl } from './dsl';
import type { Search } from './groups';
import { idRanges, rankedCount } from './similar';

type Hit = {
  _id?: string;
  _source?: ItemDoc;
  sort?: unknown[];
  matched_queries?: Record<string, number> | string[];
};
type Hits = { hits: { hits: Hit[] } };

const cosOf = (score: number): number => 2 * score - 1;

/**
 * Tuned similarity on Elasticsearch (contract §20): one kNN by the blend. Each item holds its
 * embedding and projection together in one HNSW field (blendDocVector) whose cosine with the
 * query's (blendQueryVector) is the blend over a factor of the query's own, so the blend ranks
 * in one kNN, as a plain request does. Items without that vector (processed since the pass, or
 * projecting to zero) come from a second clause over the plain field restricted to them (free
 * when there are none) and are projected here, so their blend is exact too. Exhaustive requests
 * read every ranked item in both clauses.
 */
export async function tunedSimilar(search: Search, req: SimilarRequest): Promise<ScoredItem[]> {
  const t = req.tuning!;
  const query = Float32Array.from(req.vector);
  const zq = project(t.projection, query);
  const q = blendQueryVector(t.weight, query, zq);
  const size = Math.min(MAX_KNN, req.limit);
  const from = Math.min(req.offset ?? 0, size);
  // pages past the candidate list (20 pages) are cut from the exact ranking: a deeper list of
  // their own would not cut the same ranking as the pages before
  const exact = req.exact || size > knnCandidates(req);
  const candidates = exact ? MAX_KNN : knnCandidates(req);
  const ranges = exact ? await idRanges(search, req, await rankedCount(search, req)) : [[]];
  const blends = new Map<string, number>();
  /** Items without a blend vector of this projection, with their plain cosine. */
  const stale = new Map<string, number>();
  const read = (hits: Hit[]) => {
    for (const h of hits) {
      const id = String(h.sort?.[1] ?? h._id);
      const named = (h.matched_queries ?? {}) as Record<string, number>;
      if (named.b !== undefined) blends.set(id, cosOf(named.b) * q.toBlend);
      else if (named.s !== undefined) stale.set(id, cosOf(named.s));
    }
  };
  for (const extra of ranges) {
    const rest = staleClause(req, t, q.vector.length, candidates, extra);
    const clauses = [blendClause(req, t, q.vector, candidates, extra), rest];
    const body = knnBody(clauses);
    let hits: Hit[];
    // an exhaustive range holds no more items than the size, and the clauses share none
    let whole = exact;
    try {
      hits = ((await search(body)) as Hits).hits.hits;
    } catch (e) {
      // an index no pass has given the field yet (a projection of a new size, or an index of
      // an earlier layout) holds no item with it: every item is ranked from the plain field
      if (!unmapped(e, blendField(q.vector.length))) throw e;
      hits = ((await search(knnBody([rest]))) as Hits).hits.hits;
      whole = true;
    }
    // the two clauses' scores are on different scales, so an answer cut at its size may have
    // dropped hits of either: read each in full then (only pages over 250 can be cut)
    if (whole || hits.length < body.size) read(hits);
    else for (const c of clauses) read(((await search(knnBody([c]))) as Hits).hits.hits);
  }
  if (stale.size) {
    const docs = await byIds(search, [...stale.keys()], ['id', EMBEDDING_SOURCE]);
    for (const [id, plain] of stale) {
      const v = docs.get(id) && docFloats(docs.get(id)!);
      if (v?.length === t.projection.dims)
        blends.set(id, blend(t.weight, plain, dot(zq, project(t.projection, v))));
    }
  }
  const ranked = [...blends]
    .map(([id, d]) => ({ id, d }))
    .sort((a, b) => b.d - a.d || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(from, size);
  if (!ranked.length) return [];
  const docs = await byIds(
    search,
    ranked.map((r) => r.id),
    req.includeVectors ? undefined : NO_VECTOR,
  );
  return ranked.flatMap((r) => {
    const d = docs.get(r.id);
    if (!d) return [];
    const vector = req.includeVectors ? docFloats(d) : undefined;
    return [
      {
        item: fromDoc(d),
        score: (1 + r.d) / 2,
        ...(vector ? { vector: Array.from(vector) } : {}),
      },
    ];
  });
}

/** Elasticsearch's refusal of a kNN over `field` because the index does not map it. */
const unmapped = (e: unknown, field: string): boolean =>
  e instanceof errors.ResponseError &&
  e.statusCode === 400 &&
  JSON.stringify(e.body ?? '').includes(`[${field}]`);

/** Items whose blend vector is of this projection (a zero projection has none). */
const blended = (t: TunedQuery, n: number): Dsl => ({
  bool: { filter: [{ term: { blend_model: t.model } }, { exists: { field: blendField(n) } }] },
});

/** The kNN by the blend, over the items with a blend vector of this projection. */
function blendClause(
  req: SimilarRequest,
  t: TunedQuery,
  vector: Float32Array,
  candidates: number,
  extra: Dsl[],
): Dsl {
  return {
    knn: {
      field: blendField(vector.length),
      query_vector: Array.from(vector),
      k: candidates,
      num_candidates: candidates,
      filter: rankedFilter(req, [...extra, { term: { blend_model: t.model } }]),
      _name: 'b',
    },
  };
}

/** The plain kNN over the items without one. */
function staleClause(
  req: SimilarRequest,
  t: TunedQuery,
  n: number,
  candidates: number,
  extra: Dsl[],
): Dsl {
  return {
    knn: {
      field: vectorField(req.vector.length),
      query_vector: req.vector,
      k: candidates,
      num_candidates: candidates,
      filter: rankedFilter(req, [...extra, { bool: { must_not: [blended(t, n)] } }]),
      _name: 's',
    },
  };
}

/** The clauses, named so each hit says which found it and with what score. */
function knnBody(clauses: Dsl[]): Dsl & { size: number } {
  const k = clauses.reduce((s, c) => s + ((c as { knn: { k: number } }).knn.k ?? 0), 0);
  return {
    query: { bool: { should: clauses } },
    size: Math.min(MAX_KNN, k),
    sort: [{ _score: 'desc' }, { id: 'asc' }],
    track_scores: true,
    track_total_hits: false,
    include_named_queries_score: true,
    _source: false,
  };
}

/** Documents by id, with the given source filter (all of it when undefined). */
async function byIds(
  search: Search,
  ids: string[],
  source: string[] | Dsl | undefined,
): Promise<Map<string, ItemDoc>> {
  const out = new Map<string, ItemDoc>();
  for (let i = 0; i < ids.length; i += MAX_KNN) {
    const part = ids.slice(i, i + MAX_KNN);
    const r = (await search({
      query: { terms: { id: part } },
      size: part.length,
      track_total_hits: false,
      ...(source ? { _source: source } : {}),
    })) as Hits;
    for (const h of r.hits.hits) if (h._source) out.set(h._source.id ?? String(h._id), h._source);
  }
  return out;
}
