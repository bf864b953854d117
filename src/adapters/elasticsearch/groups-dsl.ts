import type { Condition } from '../../query/ast';
import type { SearchRequest } from '../../ports/search-engine';
import { NO_VECTOR, ofField, sortDsl, whereDsl, type Dsl } from './dsl';

/**
 * Bodies for results grouped by a field (contract §13), pure like dsl.ts. A group is a scalar
 * value of the field: numbers by value (attrs.n), strings and booleans by their text (attrs.s);
 * an item without one (absent, or an array) is a group of its own.
 */

/** The attrs of `field` that make groups: its scalar values, of the readable scopes. */
const scalarOf = (field: string, ...filters: Dsl[]): Dsl => ({
  bool: { filter: [...ofField(field), { term: { 'attrs.arr': false } }, ...filters] },
});

const TEXT_TYPES = { terms: { 'attrs.t': ['s', 'b'] } };
const NUMBER_TYPE = { term: { 'attrs.t': 'n' } };

/** Items whose scalar value of `field` is the group `key` (groupKey's `n:`/`t:` form). */
function inGroup(field: string, key: string): Dsl {
  const v = key.slice(2);
  const typed =
    key[0] === 'n'
      ? [NUMBER_TYPE, { term: { 'attrs.n': Number(v) } }]
      : [TEXT_TYPES, { term: { 'attrs.s': v } }];
  return { nested: { path: 'attrs', query: scalarOf(field, ...typed) } };
}

/** Items with no scalar value of `field`: each a group of its own. */
const single = (field: string): Dsl => ({
  bool: { must_not: [{ nested: { path: 'attrs', query: scalarOf(field) } }] },
});

/** The matching items in the request's order, a batch after `after`, reading only their group. */
export function scanBody(
  req: SearchRequest,
  field: string,
  size: number,
  after: unknown[] | undefined,
): Dsl {
  return {
    _source: ['id', `metadata.${field}`, 'image'],
    query: whereDsl(req.conditions),
    sort: sortDsl(req.sort),
    size,
    track_total_hits: after === undefined,
    ...(after ? { search_after: after } : {}),
  };
}

/** The first `size` items of one group in the request's order. */
export function groupItemsBody(req: SearchRequest, field: string, key: string, size: number): Dsl {
  return {
    _source: NO_VECTOR,
    query: { bool: { filter: [whereDsl(req.conditions), inGroup(field, key)] } },
    sort: sortDsl(req.sort),
    size,
  };
}

/** Per kind, the values of `field`'s groups under a terms aggregation with `sub` beneath. */
function groupTerms(field: string, terms: Dsl, sub?: Dsl): Dsl {
  const kind = (type: Dsl, on: string): Dsl => ({
    filter: scalarOf(field, type),
    aggs: { v: { terms: { field: on, ...terms }, ...(sub ? { aggs: sub } : {}) } },
  });
  return {
    nested: { path: 'attrs' },
    aggs: { s: kind(TEXT_TYPES, 'attrs.s'), n: kind(NUMBER_TYPE, 'attrs.n') },
  };
}

/** Distinct groups among the items in scope, estimated (HyperLogLog++), plus those alone. */
const groupEstimate = (field: string): Dsl => ({
  g: {
    nested: { path: 'attrs' },
    aggs: {
      sel: {
        filter: scalarOf(field),
        aggs: {
          s: { cardinality: { field: 'attrs.s', precision_threshold: 40_000 } },
          n: { cardinality: { field: 'attrs.n', precision_threshold: 40_000 } },
        },
      },
    },
  },
  single: { filter: single(field) },
});

/** Matching items, those without a group value, and the distinct groups, estimated. */
export function groupEstimateBody(conditions: Condition[], field: string): Dsl {
  return {
    size: 0,
    track_total_hits: true,
    query: whereDsl(conditions),
    aggs: groupEstimate(field),
  };
}

/**
 * The distinct scalar values exactly, while there are at most `exactUpTo` of them: a terms
 * aggregation one larger shows when there are more, counted by a bucket pipeline so the buckets
 * themselves need not travel.
 */
export function groupTotalsBody(conditions: Condition[], field: string, exactUpTo: number): Dsl {
  const count = { count: { stats_bucket: { buckets_path: 'v>_count' } } };
  const body = groupTerms(field, { size: exactUpTo + 1 });
  const aggs = body.aggs as Record<string, { aggs: Dsl }>;
  aggs.s!.aggs = { ...aggs.s!.aggs, ...count };
  aggs.n!.aggs = { ...aggs.n!.aggs, ...count };
  return { size: 0, query: whereDsl(conditions), aggs: { g: body } };
}

/** Item counts of the given groups (values as keys). */
export function groupCountsBody(conditions: Condition[], field: string, keys: string[]): Dsl {
  const aggs: Dsl = {};
  keys.forEach((k, i) => (aggs[`k${i}`] = { filter: inGroup(field, k) }));
  return { size: 0, query: whereDsl(conditions), aggs };
}

/** Items without any value of `field`. */
const lacking = (field: string): Dsl => ({
  bool: { must_not: [{ nested: { path: 'attrs', query: { bool: { filter: ofField(field) } } } }] },
});

/** Facet values of `field` (strings and booleans by text, numbers) held by the items in scope. */
const valuesOf = (field: string): Dsl => ({
  nested: { path: 'attrs' },
  aggs: {
    sel: {
      filter: { bool: { filter: ofField(field) } },
      aggs: {
        s: { terms: { field: 'attrs.s', size: 65_536 } },
        n: { terms: { field: 'attrs.n', size: 65_536 } },
      },
    },
  },
});

/**
 * Group facets of `facets`, exactly: per group (one partition of them), the facet values its
 * matching items hold and whether one lacks each facet (`values<i>`, `lacking<i>`); the same for
 * the items without a group value, each a group of its own. The adapter adds them up.
 */
export function groupFacetBody(
  conditions: Condition[],
  field: string,
  facets: string[],
  partition: number,
  partitions: number,
): Dsl {
  const perFacet: Dsl = {};
  facets.forEach((f, i) => {
    perFacet[`values${i}`] = valuesOf(f);
    perFacet[`lacking${i}`] = { filter: lacking(f) };
  });
  return {
    size: 0,
    query: whereDsl(conditions),
    aggs: {
      g: groupTerms(
        field,
        { size: 65_536, include: { partition, num_partitions: partitions } },
        { items: { reverse_nested: {}, aggs: perFacet } },
      ),
      ...(partition === 0 ? { single: { filter: single(field), aggs: perFacet } } : {}),
    },
  };
}

/**
 * Group facets when more groups match than are counted exactly: per value of `facet`, the
 * distinct groups of the items holding it, estimated; the same for the items lacking it.
 */
export function groupFacetEstimateBody(
  conditions: Condition[],
  field: string,
  facet: string,
  size: number,
): Dsl {
  const perValue = { items: { reverse_nested: {}, aggs: groupEstimate(field) } };
  const terms = (on: string): Dsl => ({ terms: { field: on, size }, aggs: perValue });
  return {
    size: 0,
    query: whereDsl(conditions),
    aggs: {
      v: {
        nested: { path: 'attrs' },
        aggs: {
          sel: {
            filter: { bool: { filter: ofField(facet) } },
            aggs: { s: terms('attrs.s'), n: terms('attrs.n') },
          },
        },
      },
      lacking: { filter: lacking(facet), aggs: groupEstimate(field) },
    },
  };
}
