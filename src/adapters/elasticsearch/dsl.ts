import { onField, type FiguresSpec, type HistogramSpec } from '../../domain/figures';
import { isServiceTimeField } from '../../domain/limits';
import { literalForms, type Condition } from '../../query/ast';
import type { RankedSet, SearchRequest, SimilarRequest } from '../../ports/search-engine';
import { QUERYABLE_SCOPES } from '../value-index';
import { EMBEDDING_SOURCE, vectorField } from './document';

/** Query DSL as plain JSON: built by pure functions, pinned by golden files. */
export type Dsl = Record<string, unknown>;

const TIME_FIELD = { service_created_at: 'created_at', service_updated_at: 'updated_at' } as const;

/** The values of `field` the Vision API may read: never privateMetadata's (contract §6). */
export const ofField = (field: string): Dsl[] => [
  { term: { 'attrs.f': field } },
  { terms: { 'attrs.scope': QUERYABLE_SCOPES } },
];

const attrs = (field: string, ...filters: Dsl[]): Dsl => ({
  nested: {
    path: 'attrs',
    query: { bool: { filter: [...ofField(field), ...filters] } },
  },
});

/** Items holding any of `values` in `field`: strings exactly, numbers and booleans when the value reads as one. */
function anyOf(field: string, values: string[]): Dsl {
  const forms = values.map(literalForms);
  const nums = forms.flatMap((f) => (f.num !== undefined ? [f.num] : []));
  const bools = forms.flatMap((f) => (f.bool !== undefined ? [String(f.bool)] : []));
  const should: Dsl[] = [
    {
      bool: {
        filter: [{ term: { 'attrs.t': 's' } }, { terms: { 'attrs.s': forms.map((f) => f.str) } }],
      },
    },
  ];
  if (nums.length)
    should.push({
      bool: { filter: [{ term: { 'attrs.t': 'n' } }, { terms: { 'attrs.n': nums } }] },
    });
  if (bools.length)
    should.push({
      bool: { filter: [{ term: { 'attrs.t': 'b' } }, { terms: { 'attrs.s': bools } }] },
    });
  return attrs(field, { bool: { should, minimum_should_match: 1 } });
}

const bounds = (c: { gte?: number; lte?: number }): Dsl => ({
  ...(c.gte !== undefined ? { gte: c.gte } : {}),
  ...(c.lte !== undefined ? { lte: c.lte } : {}),
});

/** One condition as a filter clause; `exclude` is returned as { must_not }. */
function conditionDsl(c: Condition): { filter?: Dsl[]; must_not?: Dsl[] } {
  switch (c.kind) {
    case 'match':
      return { filter: [anyOf(c.field, c.values)] };
    case 'exclude':
      return { must_not: [anyOf(c.field, c.values)] };
    case 'range':
      return {
        filter: [attrs(c.field, { term: { 'attrs.t': 'n' } }, { range: { 'attrs.n': bounds(c) } })],
      };
    case 'timeRange':
      return { filter: [{ range: { [TIME_FIELD[c.field]]: bounds(c) } }] };
    case 'text':
      return { filter: c.terms.map((t) => ({ term: { terms: t } })) };
    case 'exists':
      return { filter: [attrs(c.field)] };
    case 'any':
      // An empty should clause would match everything in filter context.
      return {
        filter: [
          c.of.length
            ? {
                bool: { should: c.of.map((conj) => conjunctionDsl(conj)), minimum_should_match: 1 },
              }
            : { match_none: {} },
        ],
      };
    case 'none':
      return { must_not: [conjunctionDsl(c.of)] };
    case 'ids':
      return { filter: [{ ids: { values: c.ids } }] };
  }
}

/** All of `conditions` as one bool query (matches everything when there are none). */
function conjunctionDsl(conditions: Condition[], first: Dsl[] = []): Dsl {
  const filter: Dsl[] = [...first];
  const mustNot: Dsl[] = [];
  for (const c of conditions) {
    const d = conditionDsl(c);
    filter.push(...(d.filter ?? []));
    mustNot.push(...(d.must_not ?? []));
  }
  return { bool: { filter, ...(mustNot.length ? { must_not: mustNot } : {}) } };
}

/** Processed items satisfying every condition. Never query_string: input is never parsed by ES. */
export function whereDsl(conditions: Condition[]): Dsl {
  return conjunctionDsl(conditions, [{ term: { state: 'processed' } }]);
}

/** Numbers first, then strings, then items lacking the field (both orders); ties by id. */
export function sortDsl(sort: SearchRequest['sort']): Dsl[] {
  if (isServiceTimeField(sort.field))
    return [{ [TIME_FIELD[sort.field]]: { order: sort.order } }, { id: { order: 'asc' } }];
  const scalar = (t: 'n' | 's'): Dsl => ({
    path: 'attrs',
    filter: {
      bool: {
        filter: [
          ...ofField(sort.field),
          { term: { 'attrs.t': t } },
          { term: { 'attrs.arr': false } },
        ],
      },
    },
  });
  return [
    { 'attrs.n': { order: sort.order, missing: '_last', nested: scalar('n') } },
    { 'attrs.s': { order: sort.order, missing: '_last', nested: scalar('s') } },
    { id: { order: 'asc' } },
  ];
}

/**
 * Results never carry the embedding back, nor the copy signature (contract §18): clients do not
 * see them and they are the bulk of a document.
 */
export const NO_VECTOR = {
  excludes: ['vector_*', EMBEDDING_SOURCE, 'tuned_f32', 'image.copySignature'],
};

/** Elasticsearch's largest k and num_candidates. */
export const MAX_KNN = 10_000;

/** The items a similarity request ranks (port RankedSet) as one bool filter, plus `extra`. */
export function rankedFilter(set: RankedSet, extra: Dsl[] = []): Dsl {
  const where = whereDsl(set.conditions) as { bool: { filter: Dsl[]; must_not?: Dsl[] } };
  const filter = [...where.bool.filter, { term: { embedder: set.embedder } }, ...extra];
  const mustNot = [...(where.bool.must_not ?? [])];
  if (set.excludeIds.length) mustNot.push({ terms: { id: set.excludeIds } });
  return { bool: { filter, ...(mustNot.length ? { must_not: mustNot } : {}) } };
}

/** Processed items with an embedding by `embedder` of `dims` dimensions. */
export const embeddedBy = (embedder: string, dims: number): Dsl[] => [
  { term: { state: 'processed' } },
  { term: { embedder } },
  { exists: { field: vectorField(dims) } },
];

/**
 * The HNSW candidates one approximate ranking reads. Wider than Elasticsearch's usual 1.5 × k:
 * recall matters more than the few ms it costs (docs/engines.md). Paged requests derive it from
 * the page size alone, so every page cuts the same candidate list.
 */
export function knnCandidates(req: SimilarRequest): number {
  return Math.min(MAX_KNN, Math.max(200, 20 * (req.pageSize ?? req.limit)));
}

/**
 * Filtered kNN as a query: the q filter runs inside the HNSW search, so `size` results come back
 * whenever that many items match (post-filtering would return short pages). All `candidates`
 * come back from each shard and are sorted by score, then id, so equal scores have one order and
 * a smaller `size` cuts a prefix of a larger one. Lucene compares every vector exactly when a
 * segment holds no more matching documents than `candidates`.
 */
export function knnBody(
  req: SimilarRequest,
  p: { candidates: number; size: number; from?: number; extra?: Dsl[]; source?: boolean },
): Dsl {
  return {
    query: {
      knn: {
        field: vectorField(req.vector.length),
        query_vector: req.vector,
        k: p.candidates,
        num_candidates: p.candidates,
        filter: rankedFilter(req, p.extra),
      },
    },
    ...(p.from ? { from: p.from } : {}),
    size: p.size,
    sort: [{ _score: 'desc' }, { id: 'asc' }],
    track_scores: true,
    track_total_hits: false,
    ...(p.source === false ? { _source: false } : req.includeVectors ? {} : { _source: NO_VECTOR }),
  };
}

/** How many items a similarity request ranks. */
export const rankedCountBody = (set: RankedSet): Dsl => ({
  query: rankedFilter(set),
  size: 0,
  track_total_hits: true,
});

/**
 * The id ending the next `span` ranked items after `after` in id order: exact similarity over
 * more items than one exact kNN takes is done in id ranges of at most `span` items.
 */
export const rangeEndBody = (set: RankedSet, after: string | undefined, span: number): Dsl => ({
  query: rankedFilter(set, after === undefined ? [] : [{ range: { id: { gt: after } } }]),
  sort: [{ id: 'asc' }],
  from: span - 1,
  size: 1,
  _source: false,
  track_total_hits: false,
});

/** Items by id, for the hits of a ranking read without their documents. */
export const byIdsBody = (ids: string[], includeVectors: boolean | undefined): Dsl => ({
  query: { terms: { id: ids } },
  size: ids.length,
  track_total_hits: false,
  ...(includeVectors ? {} : { _source: NO_VECTOR }),
});

/** A seeded random selection of matching items (explore without an id). */
export function sampleBody(conditions: Condition[], limit: number, seed: number): Dsl {
  return {
    query: {
      function_score: {
        query: whereDsl(conditions),
        random_score: { seed, field: '_seq_no' },
        boost_mode: 'replace',
      },
    },
    size: limit,
    _source: NO_VECTOR,
  };
}

export function searchBody(req: SearchRequest): Dsl {
  return {
    _source: NO_VECTOR,
    query: whereDsl(req.conditions),
    sort: sortDsl(req.sort),
    from: req.offset,
    size: req.limit,
    track_total_hits: true,
  };
}

const MAX_FACET_VALUES = 1000;

/** content/fields counts: one nested aggregation per field, public and generated values only. */
export function facetsBody(conditions: Condition[], fields: string[]): Dsl {
  const aggs: Dsl = {};
  fields.forEach((field, i) => {
    aggs[`f${i}`] = {
      nested: { path: 'attrs' },
      aggs: {
        sel: {
          filter: {
            bool: {
              filter: ofField(field),
            },
          },
          aggs: {
            s: { terms: { field: 'attrs.s', size: MAX_FACET_VALUES } },
            n: { terms: { field: 'attrs.n', size: MAX_FACET_VALUES } },
          },
        },
      },
    };
  });
  return { size: 0, query: whereDsl(conditions), aggs };
}

/** Field → value kinds of the metadata in `scopes`, for q resolution and sort checks. */
export function catalogueBody(scopes: string[]): Dsl {
  return {
    size: 0,
    aggs: {
      a: {
        nested: { path: 'attrs' },
        aggs: {
          sel: {
            filter: { terms: { 'attrs.scope': scopes } },
            aggs: {
              fields: {
                terms: { field: 'attrs.f', size: 65_536 },
                aggs: {
                  t: {
                    terms: { field: 'attrs.t' },
                    aggs: { arr: { terms: { field: 'attrs.arr' } } },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}

/** Processed items whose embedding was made by another embedder than `embedder`. */
export function staleQuery(embedder: string): Dsl {
  return {
    bool: { filter: [{ term: { state: 'processed' } }], must_not: [{ term: { embedder } }] },
  };
}

/**
 * Values per facet field beyond which `other` is still exact but the listed values may not be
 * the most frequent ones when a dataset's index has several shards (one shard, the default,
 * is always exact): each shard returns this many candidates.
 */
export const FACET_SHARD_SIZE = 10_000;

const valueTerms = (field: string, size: number): Dsl => ({
  terms: {
    field,
    size,
    shard_size: Math.max(size, FACET_SHARD_SIZE),
    order: [{ _count: 'desc' }, { _key: 'asc' }],
  },
});

/** Numeric values of `field` (array elements each) in the matching items. */
const numericValues = (field: string, aggs: Dsl): Dsl => ({
  nested: { path: 'attrs' },
  aggs: {
    sel: {
      filter: { bool: { filter: [...ofField(field), { term: { 'attrs.t': 'n' } }] } },
      aggs,
    },
  },
});

/**
 * Contract §10, first round: facets (each under `global` + its own filter, so a disjunctive
 * one drops the conditions on its field), stats, and the min/max every histogram needs to be
 * checked against the bucket limit before it is asked for.
 */
export function figuresBody(conditions: Condition[], spec: FiguresSpec): Dsl {
  const aggs: Dsl = {};
  spec.facets.forEach(({ field, disjunctive }, i) => {
    const conds = disjunctive ? conditions.filter((c) => !onField(c, field)) : conditions;
    aggs[`facet${i}`] = {
      global: {},
      aggs: {
        q: {
          filter: whereDsl(conds),
          aggs: {
            v: {
              nested: { path: 'attrs' },
              aggs: {
                sel: {
                  filter: { bool: { filter: ofField(field) } },
                  aggs: {
                    s: valueTerms('attrs.s', spec.facetSize),
                    n: valueTerms('attrs.n', spec.facetSize),
                    items: { reverse_nested: {} },
                  },
                },
              },
            },
          },
        },
      },
    };
  });
  spec.stats.forEach((field, i) => {
    aggs[`stats${i}`] = numericValues(field, { s: { stats: { field: 'attrs.n' } } });
  });
  spec.histograms.forEach((h, i) => {
    aggs[`range${i}`] =
      'calendar' in h
        ? { stats: { field: TIME_FIELD[h.field] } }
        : numericValues(h.field, { s: { stats: { field: 'attrs.n' } } });
  });
  return { size: 0, query: whereDsl(conditions), aggs };
}

/**
 * Second round: the histograms, as counts per bucket start (min_doc_count 1: the empty buckets
 * are filled in by domain/figures.ts, the same way as for the embedded engine). Times are
 * counted per hour (or day) and grouped into weeks and months there.
 */
export function histogramsBody(conditions: Condition[], histograms: HistogramSpec[]): Dsl {
  const aggs: Dsl = {};
  histograms.forEach((h, i) => {
    aggs[`hist${i}`] =
      'calendar' in h
        ? {
            histogram: {
              field: TIME_FIELD[h.field],
              interval: h.calendar === 'hour' ? 3_600_000 : 86_400_000,
              min_doc_count: 1,
            },
          }
        : numericValues(h.field, {
            h: { histogram: { field: 'attrs.n', interval: h.interval, min_doc_count: 1 } },
          });
  });
  return { size: 0, query: whereDsl(conditions), aggs };
}
