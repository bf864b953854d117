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
import { MAX_KNN, NO_VECTOR, embeddedBy, knnCandidates, rankedFilter, type Dsl } from './dsl';
import type { Search } from './groups';
import { idRanges, rankedCount } from './similar';

type Hit = {
  _id?: string;
  _source?: ItemDoc;
  sort?: unknown[];
};
type Hits = { hits: { hits: Hit[] } };

const cosOf = (score: number): number => 2 * score - 1;

/**
 * Tuned similarity on Elasticsearch (contract §20): one kNN by the blend. Each item holds its
 * embedding and projection together in one HNSW field (blendDocVector) whose cosine with the
 * query's (blendQueryVector) is the blend over a factor of the query's own, so the blend ranks
 * in one kNN, as a plain request does, and its first `limit` hits come with their documents.
 * Items without that vector (written by a worker that had not yet read this projection, or
 * projecting to zero) are searched at the same time over the plain field restricted to them, and
 * projected here, so their blend is exact too; `allBlended` says when there are none, and that
 * search is left out. Exhaustive requests do both per id range.
 */
export async function tunedSimilar(
  search: Search,
  req: SimilarRequest,
  allBlended: () => Promise<boolean>,
): Promise<ScoredItem[]> {
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
  // one range's hits carry their documents; several ranges' are read once the page is known
  const source = ranges.length > 1 ? false : req.includeVectors ? true : NO_VECTOR;
  const blends = new Map<string, number>();
  const docs = new Map<string, ItemDoc>();
  /** Items without a blend vector of this projection, with their plain cosine. */
  const stale = new Map<string, number>();
  const field = blendField(q.vector.length);
  const complete = await allBlended();
  for (const extra of ranges) {
    const [blended, rest] = await Promise.all([
      search(blendBody(req, t, q.vector, candidates, size, source, extra)).then(
        (r) => (r as Hits).hits.hits,
        // an index no pass has given the field yet (a projection of a new size, or an index of
        // an earlier layout) holds no item with it: the other search finds every item
        (e: unknown) => {
          if (unmapped(e, field)) return [];
          throw e;
        },
      ),
      complete ? NONE : search(staleBody(req, t, q.vector.length, candidates, extra)),
    ]);
    // the first `size` by the blend: an item further down cannot reach the page
    for (const h of blended) {
      const id = String(h.sort?.[1] ?? h._id);
      blends.set(id, cosOf(Number(h.sort?.[0])) * q.toBlend);
      if (h._source) docs.set(id, h._source);
    }
    for (const h of (rest as Hits).hits.hits)
      stale.set(String(h.sort?.[1] ?? h._id), cosOf(Number(h.sort?.[0])));
  }
  if (stale.size) {
    const embeddings = await byIds(search, [...stale.keys()], ['id', EMBEDDING_SOURCE]);
    for (const [id, plain] of stale) {
      const v = embeddings.get(id) && docFloats(embeddings.get(id)!);
      if (v?.length === t.projection.dims)
        blends.set(id, blend(t.weight, plain, dot(zq, project(t.projection, v))));
    }
  }
  const ranked = [...blends]
    .map(([id, d]) => ({ id, d }))
    .sort((a, b) => b.d - a.d || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(from, size);
  const unread = ranked.filter((r) => !docs.has(r.id)).map((r) => r.id);
  if (unread.length)
    for (const [id, d] of await byIds(search, unread, req.includeVectors ? undefined : NO_VECTOR))
      docs.set(id, d);
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

const NONE: Hits = { hits: { hits: [] } };

/**
 * Whether every item a request over `embedder`'s vectors can rank has the blend vector of this
 * projection: one document is enough to say no.
 */
export async function allBlended(
  search: Search,
  t: TunedQuery,
  embedder: string,
): Promise<boolean> {
  const n = t.projection.dims + t.projection.k;
  const r = (await search({
    size: 0,
    terminate_after: 1,
    track_total_hits: true,
    query: {
      bool: {
        filter: embeddedBy(embedder, t.projection.dims),
        must_not: [blended(t, n)],
      },
    },
  })) as { hits: { total?: { value: number } } };
  return (r.hits.total?.value ?? 1) === 0;
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

const ordered = {
  sort: [{ _score: 'desc' }, { id: 'asc' }],
  track_scores: true,
  track_total_hits: false,
};

/** The kNN by the blend, over the items with a blend vector of this projection. */
function blendBody(
  req: SimilarRequest,
  t: TunedQuery,
  vector: Float32Array,
  candidates: number,
  size: number,
  source: boolean | Dsl,
  extra: Dsl[],
): Dsl {
  return {
    query: {
      knn: {
        field: blendField(vector.length),
        query_vector: Array.from(vector),
        k: candidates,
        num_candidates: candidates,
        filter: rankedFilter(req, [...extra, { term: { blend_model: t.model } }]),
      },
    },
    size,
    ...ordered,
    ...(source === true ? {} : { _source: source }),
  };
}

/** The plain kNN over the items without one. */
function staleBody(
  req: SimilarRequest,
  t: TunedQuery,
  n: number,
  candidates: number,
  extra: Dsl[],
): Dsl {
  return {
    query: {
      knn: {
        field: vectorField(req.vector.length),
        query_vector: req.vector,
        k: candidates,
        num_candidates: candidates,
        filter: rankedFilter(req, [...extra, { bool: { must_not: [blended(t, n)] } }]),
      },
    },
    size: candidates,
    ...ordered,
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
