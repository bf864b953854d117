import { errors } from '@elastic/elasticsearch';
import {
  facetFigure,
  numberText,
  onField,
  type FacetFigure,
  type FiguresSpec,
  type ValueCount,
} from '../../domain/figures';
import { groupKey, groupValue, type GroupedPage } from '../../domain/group';
import type { StoredItem } from '../../domain/item';
import type { Scalar } from '../../domain/metadata';
import type { GroupedSearchRequest } from '../../ports/search-engine';
import type { Condition } from '../../query/ast';
import { fromDoc, type ItemDoc } from './document';
import { NO_VECTOR, type Dsl } from './dsl';
import {
  groupCountsBody,
  groupEstimateBody,
  groupFacetBody,
  groupFacetEstimateBody,
  groupItemsBody,
  groupTotalsBody,
  scanBody,
} from './groups-dsl';
import type { Hit } from './item-index';

interface Response {
  hits: { hits: Hit[]; total?: { value: number } | number };
  aggregations?: Record<string, unknown>;
}
/** Sends a body to the dataset's index (an empty answer when it has none). */
export type Search = (body: Dsl, filterPath?: string[]) => Promise<Response>;

type Bucket = { key: string | number; doc_count: number };

/** A scanned hit's group: its value, and the key that identifies the group (none: alone). */
function groupOfHit(h: Hit, field: string): { value: Scalar | null; key?: string } {
  const src = h._source!;
  const probe = { metadata: src.metadata ?? {}, image: src.image ?? undefined } as StoredItem;
  const value = groupValue(probe, field);
  const key = groupKey(value);
  return key === undefined ? { value: null } : { value: value!, key };
}

/** Most hits one scan request reads (the page's groups are found in growing batches). */
const MAX_BATCH = 10_000;

/**
 * A page of groups on Elasticsearch: the matching items are read in the request's order (only
 * their id and group value) until the page's groups are all open, so each group sits where its
 * best item does and none is split or repeated; then the page's items, the groups' counts and the
 * totals are read in parallel.
 */
export async function searchGroups(
  search: Search,
  req: GroupedSearchRequest,
): Promise<GroupedPage> {
  const field = req.group.field;
  const want = req.offset + req.limit;
  const totals = groupTotals(search, req.conditions, field, req.exactUpTo);
  const firsts: Array<{ id: string; value: Scalar | null; key?: string }> = [];
  const seen = new Set<string>();
  let batch = Math.min(MAX_BATCH, Math.max(100, want * 4));
  let after: unknown[] | undefined;
  while (req.limit > 0 && firsts.length < want) {
    const r = await search(scanBody(req, field, batch, after));
    for (const h of r.hits.hits) {
      const g = groupOfHit(h, field);
      if (g.key !== undefined) {
        if (seen.has(g.key)) continue;
        seen.add(g.key);
      }
      if (firsts.push({ id: h._source!.id, ...g }) >= want) break;
    }
    if (r.hits.hits.length < batch) break;
    after = r.hits.hits[r.hits.hits.length - 1]!.sort;
    batch = Math.min(MAX_BATCH, batch * 4);
  }
  const page = firsts.slice(req.offset);
  const keys = page.flatMap((g) => (g.key === undefined ? [] : [g.key]));
  const [t, counts, items] = await Promise.all([
    totals,
    keys.length ? countsOf(search, req.conditions, req.group.field, keys) : [],
    pageItems(search, req, page),
  ]);
  const countOf = new Map(keys.map((k, i) => [k, counts[i]!]));
  return {
    ...t,
    groups: page.map((g, i) => ({
      value: g.value,
      count: g.key === undefined ? 1 : countOf.get(g.key)!,
      items: items[i]!,
    })),
  };
}

/** Each page group's items: its best alone (read by id), or its first `size` in order. */
async function pageItems(
  search: Search,
  req: GroupedSearchRequest,
  page: Array<{ id: string; key?: string }>,
): Promise<StoredItem[][]> {
  const size = req.group.size;
  const alone = page.filter((g) => g.key === undefined || size === 1).map((g) => g.id);
  const byId = new Map<string, StoredItem>();
  if (alone.length) {
    const r = await search({
      _source: NO_VECTOR,
      query: { terms: { id: alone } },
      size: alone.length,
    });
    for (const h of r.hits.hits) byId.set(h._source!.id, fromDoc(h._source as ItemDoc));
  }
  return Promise.all(
    page.map(async (g) => {
      if (g.key === undefined || size === 1) return byId.has(g.id) ? [byId.get(g.id)!] : [];
      const r = await search(groupItemsBody(req, req.group.field, g.key, size));
      return r.hits.hits.map((h) => fromDoc(h._source as ItemDoc));
    }),
  );
}

async function countsOf(
  search: Search,
  conditions: Condition[],
  field: string,
  keys: string[],
): Promise<number[]> {
  const r = await search(groupCountsBody(conditions, field, keys));
  return keys.map((_, i) => (r.aggregations?.[`k${i}`] as { doc_count: number }).doc_count);
}

/** Item counts of groups named by value, for similarity results. */
export async function groupCounts(
  search: Search,
  conditions: Condition[],
  field: string,
  values: Scalar[],
): Promise<number[]> {
  const keys = values.map((v) => groupKey(v) ?? '');
  const known = keys.filter((k) => k !== '');
  const counts = known.length ? await countsOf(search, conditions, field, known) : [];
  let i = 0;
  return keys.map((k) => (k === '' ? 0 : counts[i++]!));
}

type KindTotals = {
  count?: { count: number };
  v?: { sum_other_doc_count: number };
};

/**
 * An estimate this far above the exact bound is taken as it is: below its precision threshold
 * HyperLogLog++ errs by far less, so the exact count could not be within the bound.
 */
const ESTIMATE_MARGIN = 1.2;

/**
 * total_results, total_groups and whether that is exact: first an estimate (cheap), then, only
 * when the groups may number at most `exactUpTo`, the exact count (a terms aggregation).
 */
export async function groupTotals(
  search: Search,
  conditions: Condition[],
  field: string,
  exactUpTo: number,
): Promise<Omit<GroupedPage, 'groups'>> {
  const first = await search(groupEstimateBody(conditions, field));
  const total =
    typeof first.hits.total === 'number' ? first.hits.total : (first.hits.total?.value ?? 0);
  const single = (first.aggregations?.single as { doc_count: number } | undefined)?.doc_count ?? 0;
  const estimated = estimatedGroups(first.aggregations as Estimate | undefined) - single;
  if (estimated > exactUpTo * ESTIMATE_MARGIN)
    return { total, totalGroups: estimated + single, totalGroupsExact: false };
  const r = await search(groupTotalsBody(conditions, field, exactUpTo), [
    '-aggregations.g.s.v.buckets',
    '-aggregations.g.n.v.buckets',
  ]);
  const g = (r.aggregations?.g ?? {}) as { s?: KindTotals; n?: KindTotals };
  const listed = (g.s?.count?.count ?? 0) + (g.n?.count?.count ?? 0);
  const exact =
    (g.s?.v?.sum_other_doc_count ?? 0) === 0 &&
    (g.n?.v?.sum_other_doc_count ?? 0) === 0 &&
    listed <= exactUpTo;
  return {
    total,
    totalGroups: (exact ? listed : Math.max(estimated, exactUpTo + 1)) + single,
    totalGroupsExact: exact,
  };
}

/** Groups per partition of a group facet request: their sub-buckets stay far below the limit. */
const GROUPS_PER_PARTITION = 2_000;

type ValueAggs = { sel?: { s?: { buckets: Bucket[] }; n?: { buckets: Bucket[] } } };
type GroupBucket = Bucket & { items: Record<string, ValueAggs | { doc_count: number }> };

/**
 * Group facets (contract §13), exact: the groups' facet values are read per group in partitions
 * (requests in parallel), so no request nears Elasticsearch's bucket limit; a request refused
 * for too many buckets all the same is asked again in twice as many partitions.
 */
export async function groupFacets(
  search: Search,
  conditions: Condition[],
  spec: FiguresSpec & { groupBy: string },
  perPartition = GROUPS_PER_PARTITION,
): Promise<Record<string, FacetFigure>> {
  const out: Record<string, FacetFigure> = {};
  const exactUpTo = spec.exactUpTo ?? Number.MAX_SAFE_INTEGER;
  // Facets counted under the same conditions (all but the disjunctive ones) share each request.
  const sets = new Map<string, { conds: Condition[]; fields: string[] }>();
  for (const { field, disjunctive } of spec.facets) {
    const conds = disjunctive ? conditions.filter((c) => !onField(c, field)) : conditions;
    const key = JSON.stringify(conds);
    const set = sets.get(key) ?? { conds, fields: [] };
    set.fields.push(field);
    sets.set(key, set);
  }
  await Promise.all(
    [...sets.values()].map(async ({ conds, fields }) => {
      const totals = await groupTotals(search, conds, spec.groupBy, exactUpTo);
      if (!totals.totalGroupsExact) {
        await Promise.all(
          fields.map(async (field) => {
            const est = await estimatedCounts(search, conds, spec.groupBy, field);
            out[field] = { ...facetFigure(est.values, spec.facetSize, est.missing), exact: false };
          }),
        );
        return;
      }
      const groups = totals.totalGroups * fields.length;
      let partitions = Math.max(1, Math.ceil(groups / perPartition));
      for (;;) {
        try {
          const counts = await facetCounts(search, conds, spec.groupBy, fields, partitions);
          fields.forEach((field, i) => {
            out[field] = facetFigure(counts[i]!.values, spec.facetSize, counts[i]!.missing);
          });
          return;
        } catch (e) {
          if (!tooManyBuckets(e) || partitions >= 1024) throw e;
          partitions *= 2;
        }
      }
    }),
  );
  return out;
}

const tooManyBuckets = (e: unknown): boolean =>
  e instanceof errors.ResponseError && JSON.stringify(e.body ?? '').includes('too_many_buckets');

type FacetAggs = Record<string, ValueAggs | { doc_count: number }>;

/** Per facet, its values' group counts and the groups lacking it, over every partition. */
async function facetCounts(
  search: Search,
  conditions: Condition[],
  groupBy: string,
  facets: string[],
  partitions: number,
): Promise<Array<{ values: ValueCount[]; missing: number }>> {
  const out = facets.map(() => ({ counts: new Map<string, ValueCount>(), missing: 0 }));
  const add = (i: number, kind: 's' | 'n', key: string | number, n: number) => {
    const id = `${kind === 'n' ? 'n' : 't'}:${String(key)}`;
    const had = out[i]!.counts.get(id);
    if (had) had.count += n;
    else
      out[i]!.counts.set(
        id,
        kind === 'n'
          ? { num: Number(key), text: numberText(Number(key)), count: n }
          : { text: String(key), count: n },
      );
  };
  // one group per bucket: each value it holds counts 1; items alone count one each
  const tally = (aggs: FacetAggs, perItem: boolean) =>
    facets.forEach((_, i) => {
      const sel = (aggs[`values${i}`] as ValueAggs).sel;
      for (const vk of ['s', 'n'] as const)
        for (const vb of sel?.[vk]?.buckets ?? []) add(i, vk, vb.key, perItem ? vb.doc_count : 1);
      const lacking = (aggs[`lacking${i}`] as { doc_count: number }).doc_count;
      out[i]!.missing += perItem ? lacking : lacking > 0 ? 1 : 0;
    });
  const answers = await Promise.all(
    Array.from({ length: partitions }, (_, p) =>
      search(groupFacetBody(conditions, groupBy, facets, p, partitions)),
    ),
  );
  for (const r of answers) {
    const aggs = r.aggregations ?? {};
    const g = aggs.g as Record<'s' | 'n', { v: { buckets: GroupBucket[] } }> | undefined;
    for (const kind of ['s', 'n'] as const)
      for (const b of g?.[kind]?.v.buckets ?? []) tally(b.items, false);
    if (aggs.single) tally(aggs.single as FacetAggs, true);
  }
  return out.map((o) => ({ values: [...o.counts.values()], missing: o.missing }));
}

/** Values listed by an estimated group facet (their `other` counts only these). */
const ESTIMATED_VALUES = 1000;

type Estimate = {
  g?: { sel?: { s?: { value: number }; n?: { value: number } } };
  single?: { doc_count: number };
};
const estimatedGroups = (e: Estimate | undefined): number =>
  (e?.g?.sel?.s?.value ?? 0) + (e?.g?.sel?.n?.value ?? 0) + (e?.single?.doc_count ?? 0);

/** Group facet counts estimated per value (contract §13 allows it above the exact bound). */
async function estimatedCounts(
  search: Search,
  conditions: Condition[],
  groupBy: string,
  facet: string,
): Promise<{ values: ValueCount[]; missing: number }> {
  const r = await search(groupFacetEstimateBody(conditions, groupBy, facet, ESTIMATED_VALUES));
  const aggs = r.aggregations ?? {};
  const sel = (
    aggs.v as { sel?: Record<'s' | 'n', { buckets: Array<Bucket & { items: Estimate }> }> }
  )?.sel;
  const values: ValueCount[] = [];
  for (const kind of ['s', 'n'] as const)
    for (const b of sel?.[kind]?.buckets ?? []) {
      const count = estimatedGroups(b.items);
      values.push(
        kind === 'n'
          ? { num: Number(b.key), text: numberText(Number(b.key)), count }
          : { text: String(b.key), count },
      );
    }
  return { values, missing: estimatedGroups(aggs.lacking as Estimate) };
}
