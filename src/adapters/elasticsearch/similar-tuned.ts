import { project } from '../../domain/tuning/lda';
import { dot } from '../../domain/tuning/linalg';
import type { ScoredItem, SimilarRequest, TunedQuery } from '../../ports/search-engine';
import {
  EMBEDDING_SOURCE,
  decodeVector,
  docFloats,
  fromDoc,
  tunedField,
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

/** A candidate with what is known of its two cosines. */
interface Candidate {
  id: string;
  plain?: number;
  tuned?: number;
  /** The stored projection bytes, when of the request's projection. */
  z?: Float32Array;
}

const cosOf = (score: number): number => 2 * score - 1;

/**
 * Tuned similarity on Elasticsearch (contract §20). Each item carries its projection in an
 * HNSW field of its own (tunedFields), so one search reads candidates from both fields at
 * once: two named kNN clauses, each hit with the score of each clause that found it. A
 * candidate found by one clause only is completed exactly — its projected cosine from its
 * stored projection, its plain cosine by a kNN restricted to such candidates (exact: the filter
 * leaves no more than k) — unless even its best possible plain cosine (the plain clause's last)
 * cannot lift it onto the page. Exhaustive requests read every ranked item in both clauses.
 */
export async function tunedSimilar(search: Search, req: SimilarRequest): Promise<ScoredItem[]> {
  const t = req.tuning!;
  const query = Float32Array.from(req.vector);
  const zq = project(t.projection, query);
  const size = Math.min(MAX_KNN, req.limit);
  const from = Math.min(req.offset ?? 0, size);
  // pages past the candidate list (20 pages) are cut from the exact ranking: a deeper list of
  // their own would not cut the same ranking as the pages before
  const exact = req.exact || size > knnCandidates(req);
  const candidates = exact ? MAX_KNN : knnCandidates(req);
  const ranges = exact ? await idRanges(search, req, await rankedCount(search, req)) : [[]];
  const found = new Map<string, Candidate>();
  /** The lowest plain score the plain clause returned in a full list: a bound for the rest. */
  let plainFloor = -1;
  for (const extra of ranges) {
    const body = roundOne(req, t, zq, candidates, extra);
    const hits = ((await search(body)) as Hits).hits.hits;
    let plainHits = 0;
    let lowest = 1;
    for (const h of hits) {
      const id = String(h.sort?.[1] ?? h._id);
      const named = (h.matched_queries ?? {}) as Record<string, number>;
      const c: Candidate = { id };
      if (named.p !== undefined) {
        c.plain = cosOf(named.p);
        plainHits++;
        lowest = Math.min(lowest, c.plain);
      }
      const src = h._source;
      if (src?.tuned_model === t.model && src.tuned_f32) c.z = decodeVector(src.tuned_f32);
      found.set(id, c);
    }
    // a plain list cut at `candidates` bounds the plain cosine of every item it left out; an
    // answer cut at its size may have dropped plain hits, so nothing is bounded then
    if (hits.length >= body.size) plainFloor = 1;
    else if (plainHits >= candidates) plainFloor = Math.max(plainFloor, lowest);
  }
  // items written since the projection (no stored projection of it yet) are projected here
  const stale = [...found.values()].filter((c) => !c.z);
  if (stale.length) {
    const docs = await byIds(
      search,
      stale.map((c) => c.id),
      ['id', EMBEDDING_SOURCE],
    );
    for (const c of stale) {
      const v = docs.get(c.id) && docFloats(docs.get(c.id)!);
      if (v?.length === t.projection.dims) c.z = project(t.projection, v);
    }
  }
  for (const c of found.values()) c.tuned = c.z ? dot(zq, c.z) : undefined;
  const w = t.weight;
  const blend = (c: Candidate) => (1 - w) * c.plain! + w * (c.tuned ?? 0);
  const complete = [...found.values()].filter((c) => c.plain !== undefined);
  // the page's last blend among complete candidates: an incomplete one that cannot beat it is out
  const sorted = complete.map(blend).sort((a, b) => b - a);
  const bar = sorted.length >= size ? sorted[size - 1]! : -Infinity;
  const missing = [...found.values()].filter(
    (c) =>
      c.plain === undefined &&
      c.tuned !== undefined &&
      (1 - w) * Math.max(plainFloor, -1) + w * c.tuned >= bar - 1e-9,
  );
  if (missing.length) {
    for (let i = 0; i < missing.length; i += MAX_KNN) {
      const part = missing.slice(i, i + MAX_KNN);
      const r = (await search({
        query: {
          knn: {
            field: vectorField(req.vector.length),
            query_vector: req.vector,
            k: part.length,
            num_candidates: part.length,
            filter: rankedFilter(req, [{ terms: { id: part.map((c) => c.id) } }]),
          },
        },
        size: part.length,
        _source: false,
        sort: [{ _score: 'desc' }, { id: 'asc' }],
        track_scores: true,
        track_total_hits: false,
      })) as Hits;
      const byId = new Map(part.map((c) => [c.id, c]));
      for (const h of r.hits.hits) {
        const c = byId.get(String(h.sort?.[1] ?? h._id));
        if (c) c.plain = cosOf(Number(h.sort?.[0]));
      }
    }
  }
  const ranked = [...found.values()]
    .filter((c) => c.plain !== undefined && c.tuned !== undefined)
    .map((c) => ({ id: c.id, d: blend(c) }))
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

/** Both kNN clauses, named so each hit says which found it and with what score. */
function roundOne(
  req: SimilarRequest,
  t: TunedQuery,
  zq: Float32Array,
  candidates: number,
  extra: Dsl[],
): Dsl & { size: number } {
  const knn = (field: string, vector: ArrayLike<number>, name: string, more: Dsl[]) => ({
    knn: {
      field,
      query_vector: Array.from(vector),
      k: candidates,
      num_candidates: candidates,
      filter: rankedFilter(req, [...extra, ...more]),
      _name: name,
    },
  });
  return {
    query: {
      bool: {
        should: [
          knn(vectorField(req.vector.length), req.vector, 'p', []),
          knn(tunedField(t.projection.k), zq, 't', [{ term: { tuned_model: t.model } }]),
        ],
      },
    },
    size: Math.min(MAX_KNN, 2 * candidates),
    sort: [{ _score: 'desc' }, { id: 'asc' }],
    track_scores: true,
    track_total_hits: false,
    include_named_queries_score: true,
    _source: ['id', 'tuned_model', 'tuned_f32'],
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
