/**
 * Contract §13 (results grouped by a field) on whichever engine the project runs: a seeded random
 * catalogue of variants sharing a `parent` (with items lacking it, array parents, numeric parents,
 * and strings and booleans of the same text), and every group figure compared with a brute-force
 * model over all items — group pages, totals, counts, further items, group facets — for fixed
 * cases and for random q / sort / order / disjunctive / facet_scope (fast-check). The similarity
 * requests (similar, explore, collection, lens) are checked for one entry per group, the counts,
 * and that no better group or nearer group mate was passed over.
 */
import fc from 'fast-check';
import { setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';
import { cmpText, holds, qOf, valuesOf, type Cond, type Md, type Value } from '../helpers/q-model';

interface Doc {
  id: string;
  md: Md;
}

/**
 * The catalogue is seeded-random: fixed by default, so that every run judges the same catalogue;
 * GROUPS_SEED=<n> tries another (the seed is in the describe names).
 */
const SEED = Number(process.env.GROUPS_SEED) || 1;

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const COLORS = ['red', 'blue', 'green', 'black', 'Ärger', 'zeta'];
const TAGS = ['t0', 't1', 't2', 't3', 't4', 't5'];
/** Code-point order matters: 'Apple' < 'Zebra' < 'apple' < 'b' < 'zebra' < 'Äpfel'; '10' < '9'. */
const LABELS = ['apple', 'Apple', 'Äpfel', 'banana', 'b', 'zebra', 'Zebra', '10', '9'];

/**
 * About 265 items: groups of 1–6 variants with string parents, numeric parents (5 and 7 also exist as
 * strings, which are other groups), a group mixing the string "true" with the boolean true (one
 * group) and one mixing "false" with false, items without a parent and items with an array parent
 * (each a group of its own), plus facet and sort fields with ties and missing values.
 */
function catalogue(seed: number): Doc[] {
  const rnd = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const parents: Array<Value | Value[] | undefined> = [];
  const group = (vals: Value[]) => {
    const n = int(1, 6);
    for (let k = 0; k < n; k++) parents.push(vals[k % vals.length]!);
  };
  // string groups until, with the rest below, there are about 250 items
  for (let g = 0; parents.length < 190 || g < 12; g++) group([`p${String(g).padStart(2, '0')}`]);
  for (const n of [5, 7, 12, 2.5, 0, 40]) group([n]);
  group(['5']);
  group(['7']);
  // one group each: the text decides, not the type (at least one of each kind)
  parents.push('true', true);
  group(['true', true]);
  parents.push('false', false);
  group([false, 'false']);
  for (let k = 0; k < 22; k++) parents.push(undefined);
  const arrays: Value[][] = [['p01', 'p02'], ['p03'], [5, 12], ['true'], ['p04', 'p00'], [7]];
  for (let k = 0; k < 14; k++) parents.push(pick(arrays));
  // shuffle, so that ids (the sort tie-break) are unrelated to groups
  for (let i = parents.length - 1; i > 0; i--) {
    const j = int(0, i);
    [parents[i], parents[j]] = [parents[j], parents[i]];
  }
  return parents.map((parent, i) => {
    const md: Md = {
      tags: [...new Set([pick(TAGS), pick(TAGS), pick(TAGS)].slice(0, int(1, 3)))],
      instock: rnd() < 0.1 ? pick(['true', 'false']) : rnd() < 0.5,
    };
    if (parent !== undefined) md.parent = parent;
    if (rnd() < 0.88) md.color = pick(COLORS);
    if (rnd() < 0.9) md.price = int(0, 30) + (rnd() < 0.2 ? 0.5 : 0);
    if (rnd() < 0.85) md.label = pick(LABELS);
    return { id: `g-${String(i).padStart(3, '0')}`, md };
  });
}

const docs = catalogue(SEED);
const N = docs.length;
const byIdMap = new Map(docs.map((d) => [d.id, d]));
const docOf = (id: string) => {
  const d = byIdMap.get(id);
  if (!d) throw new Error(`the service returned an unknown id ${id} (seed ${SEED})`);
  return d;
};

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
/** The engine's ungrouped order of every item by service_updated_at (the default sort). */
const updatedOrder: Record<'asc' | 'desc', string[]> = { asc: [], desc: [] };

const get = (path: string, qs: string) =>
  t.call('GET', `${ds.base}/${path}?${qs}`, { token: ds.dsToken });
const search = (qs: string) => get('search', qs);

async function allIds(qs: string): Promise<string[]> {
  const out: string[] = [];
  for (let page = 1; ; page++) {
    const r = await search(`${qs}&limit=50&page=${page}`);
    if (r.status !== 200) throw new Error(`${qs}: ${r.status} ${JSON.stringify(r.body)}`);
    out.push(...(r.body.results as Array<{ id: string }>).map((x) => x.id));
    if (r.body.results.length < 50) return out;
  }
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  const s = await t.call('PUT', `${ds.base}/settings/fields`, {
    token: ds.orgToken,
    body: { fields: { tags: ['*'], parent: ['*'] } },
  });
  expect(s.status).toBe(200);
  const content = docs.map((d, i) => ({
    id: d.id,
    url: `${img.url}/img/${i}.png`,
    metadata: d.md,
  }));
  const r = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
  updatedOrder.desc = await allIds('order=desc');
  updatedOrder.asc = await allIds('order=asc');
}, 180_000);
afterAll(async () => {
  await t?.stop();
  await img?.close();
});

// ---- the model -------------------------------------------------------------------------------

const matches = (d: Doc, cs: Cond[]) => cs.every((c) => holds(d.md, c));

/** A scalar's group key (numbers by value, strings and booleans by text); undefined: no group. */
const keyOfValue = (v: unknown): string | undefined =>
  typeof v === 'number'
    ? `n:${v}`
    : typeof v === 'string' || typeof v === 'boolean'
      ? `t:${String(v)}`
      : undefined;
/** The group an item belongs to: its parent's key, or a group of its own. */
const gidOf = (d: Doc, field = 'parent') => keyOfValue(d.md[field]) ?? `own:${d.id}`;
/** What a result's `group.value` must be: the group's key, or null for an item's own group. */
const shownKey = (d: Doc, field = 'parent') => keyOfValue(d.md[field]) ?? null;
const keyOfShown = (v: unknown) => (v === null ? null : (keyOfValue(v) ?? `bad value ${v}`));

const byId = (a: Doc, b: Doc) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

type Sort = 'price' | 'label' | undefined;
type Order = 'asc' | 'desc';

/** Contract §6: items lacking the sort field last in both orders, ties by id ascending. */
function modelOrder(sort: 'price' | 'label', order: Order): Doc[] {
  const has = docs.filter((d) => d.md[sort] !== undefined);
  const missing = docs.filter((d) => d.md[sort] === undefined).sort(byId);
  const sign = order === 'asc' ? 1 : -1;
  const cmp =
    sort === 'price'
      ? (a: Doc, b: Doc) => (a.md.price as number) - (b.md.price as number)
      : (a: Doc, b: Doc) => cmpText(a.md.label as string, b.md.label as string);
  return [...has.sort((a, b) => sign * cmp(a, b) || byId(a, b)), ...missing];
}
/** The request's own order of every item (the default sort is the engine's, read ungrouped). */
const orderOf = (sort: Sort, order: Order): Doc[] =>
  sort ? modelOrder(sort, order) : updatedOrder[order].map(docOf);

interface ModelGroup {
  gid: string;
  key: string | null;
  /** The group's matching items in the request's order: [0] is the best. */
  docs: Doc[];
}

/** The matching groups in the order of their best items. */
function modelGroups(cs: Cond[], sort: Sort, order: Order, field = 'parent'): ModelGroup[] {
  const out: ModelGroup[] = [];
  const byGid = new Map<string, ModelGroup>();
  for (const d of orderOf(sort, order)) {
    if (!matches(d, cs)) continue;
    const gid = gidOf(d, field);
    let g = byGid.get(gid);
    if (!g) {
      g = { gid, key: shownKey(d, field), docs: [] };
      byGid.set(gid, g);
      out.push(g);
    }
    g.docs.push(d);
  }
  return out;
}

/** Items of each group (by gid) that match cs, across the dataset. */
function matchingByGroup(cs: Cond[]): Map<string, Doc[]> {
  const m = new Map<string, Doc[]>();
  for (const d of docs.filter((x) => matches(x, cs))) {
    const gid = gidOf(d);
    m.set(gid, [...(m.get(gid) ?? []), d]);
  }
  return m;
}

/**
 * Facet counts: per value, the number of distinct units (items, or groups) among the matches
 * holding it; missing, the units with a match lacking the field. Ordered as contract §10 says.
 */
function modelFacet(
  cs: Cond[],
  field: string,
  size: number,
  disjunctive: boolean,
  scope: 'items' | 'groups',
) {
  const used = disjunctive ? cs.filter((c) => c.field !== field) : cs;
  const unit = (d: Doc) => (scope === 'items' ? d.id : gidOf(d));
  const counts = new Map<string, { num?: number; text: string; units: Set<string> }>();
  const missing = new Set<string>();
  for (const d of docs.filter((x) => matches(x, used))) {
    const vs = valuesOf(d.md, field);
    if (!vs.length) missing.add(unit(d));
    for (const v of vs) {
      const key = `${typeof v === 'number' ? 'n' : 't'}:${String(v)}`;
      const e = counts.get(key) ?? {
        ...(typeof v === 'number' ? { num: v } : {}),
        text: String(v),
        units: new Set<string>(),
      };
      e.units.add(unit(d));
      counts.set(key, e);
    }
  }
  const all = [...counts.values()]
    .map((e) => ({ ...e, count: e.units.size }))
    .sort(
      (a, b) =>
        b.count - a.count ||
        (a.num !== undefined && b.num !== undefined
          ? a.num - b.num
          : a.num !== undefined
            ? -1
            : b.num !== undefined
              ? 1
              : cmpText(a.text, b.text)),
    );
  return {
    buckets: all.slice(0, size).map((v) => ({ value: v.text, count: v.count })),
    other: all.slice(size).reduce((s, v) => s + v.count, 0),
    missing: missing.size,
  };
}

function modelStats(cs: Cond[], field: string) {
  const ns = docs
    .filter((d) => matches(d, cs))
    .flatMap((d) => valuesOf(d.md, field).filter((v): v is number => typeof v === 'number'));
  if (!ns.length) return { count: 0, min: null, max: null, avg: null, sum: 0 };
  const sum = ns.reduce((s, n) => s + n, 0);
  return {
    count: ns.length,
    min: Math.min(...ns),
    max: Math.max(...ns),
    avg: sum / ns.length,
    sum,
  };
}

// ---- what a page shows ---------------------------------------------------------------------

interface Entry {
  id: string;
  score?: number;
  explore_url?: string;
  group?: { value: unknown; count: number; items?: Entry[] };
}

/** A page as comparable data: best item, group key, count, further items (undefined: no key). */
const shownPage = (results: Entry[]) =>
  results.map((e) => ({
    id: e.id,
    key: e.group ? keyOfShown(e.group.value) : 'no group',
    count: e.group?.count,
    items: e.group && 'items' in e.group ? e.group.items!.map((x) => x.id) : undefined,
  }));
const modelPage = (groups: ModelGroup[], size: number) =>
  groups.map((g) => ({
    id: g.docs[0]!.id,
    key: g.key,
    count: g.docs.length,
    items: size > 1 ? g.docs.slice(1, size).map((d) => d.id) : undefined,
  }));

const sortQs = (sort: Sort, order: Order | undefined) =>
  (sort ? `&sort=${sort}` : '') + (order ? `&order=${order}` : '');

// ---- the tests -----------------------------------------------------------------------------

describe(`grouped search (contract §13; catalogue seed ${SEED})`, () => {
  test('the catalogue holds what the properties need', () => {
    const kinds = (key: string) =>
      new Set(docs.filter((d) => keyOfValue(d.md.parent) === key).map((d) => typeof d.md.parent));
    expect(kinds('t:true')).toEqual(new Set(['string', 'boolean']));
    expect(kinds('t:false')).toEqual(new Set(['string', 'boolean']));
    expect(kinds('n:5').size && kinds('t:5').size).toBeTruthy();
    expect(docs.some((d) => Array.isArray(d.md.parent))).toBe(true);
    expect(docs.some((d) => d.md.parent === undefined)).toBe(true);
    const sizes = [...matchingByGroup([]).values()].map((g) => g.length);
    expect(Math.max(...sizes)).toBeGreaterThanOrEqual(3);
    expect(N).toBeGreaterThanOrEqual(220);
  });

  test('the sort model agrees with the engine’s ungrouped order', async () => {
    for (const sort of ['price', 'label'] as const)
      for (const order of ['asc', 'desc'] as const)
        expect([sort, order, await allIds(`sort=${sort}&order=${order}`)]).toEqual([
          sort,
          order,
          modelOrder(sort, order).map((d) => d.id),
        ]);
    expect(new Set(updatedOrder.desc).size).toBe(N);
    expect(updatedOrder.asc.length).toBe(N);
  });

  test('one page: best items, values, counts, totals, and the further items of each group', async () => {
    const cs: Cond[] = [{ kind: 'not', field: 'color', values: ['black'] }];
    const qs = `q=${qOf(cs)}&group=parent&group_size=3&sort=price&order=asc&limit=20`;
    const r = await search(qs);
    expect([qs, r.status]).toEqual([qs, 200]);
    const groups = modelGroups(cs, 'price', 'asc');
    expect(r.body.total_results).toBe(docs.filter((d) => matches(d, cs)).length);
    expect(r.body.total_groups).toBe(groups.length);
    expect(r.body.total_groups_exact).toBe(true);
    expect(shownPage(r.body.results)).toEqual(modelPage(groups.slice(0, 20), 3));
    // further items are result entries, and a group of one has none
    const entry = (r.body.results as Entry[]).find((e) => e.group!.items!.length > 0)!;
    expect(entry.group!.items![0]).toEqual(
      expect.objectContaining({ id: expect.any(String), explore_url: expect.any(String) }),
    );
    for (const e of r.body.results as Entry[])
      expect([e.id, e.group!.items!.length]).toEqual([e.id, Math.min(2, e.group!.count - 1)]);
    // without group_size there is no items key
    const one = await search(`q=${qOf(cs)}&group=parent&sort=price&order=asc&limit=20`);
    for (const e of one.body.results as Entry[])
      expect(Object.keys(e.group!).sort()).toEqual(['count', 'value']);
    expect(shownPage(one.body.results)).toEqual(modelPage(groups.slice(0, 20), 1));
  });

  test('numbers, strings and booleans: 5 and "5" are two groups, "true" and true one', async () => {
    const cs: Cond[] = [{ kind: 'eq', field: 'parent', values: ['5', 'true'] }];
    const r = await search(`q=${qOf(cs)}&group=parent&group_size=10&limit=50&sort=label`);
    expect(r.status).toBe(200);
    const groups = modelGroups(cs, 'label', 'desc');
    expect(r.body.total_groups).toBe(groups.length);
    expect(shownPage(r.body.results)).toEqual(modelPage(groups, 10));
    const keys = (r.body.results as Entry[]).map((e) => keyOfShown(e.group!.value));
    expect(keys).toEqual(expect.arrayContaining(['n:5', 't:5', 't:true']));
    expect(keys.filter((k) => k === 't:true')).toHaveLength(1);
    // array parents are groups of their own, value null, count 1
    for (const e of r.body.results as Entry[])
      if (Array.isArray(docOf(e.id).md.parent))
        expect([e.id, e.group!.value, e.group!.count, e.group!.items]).toEqual([e.id, null, 1, []]);
  });

  test('a field every item holds as an array: each item a group of its own', async () => {
    const r = await search('group=tags&group_size=2&limit=50&sort=price&order=desc');
    expect(r.status).toBe(200);
    expect([r.body.total_groups, r.body.total_results]).toEqual([N, N]);
    expect(shownPage(r.body.results)).toEqual(
      modelOrder('price', 'desc')
        .slice(0, 50)
        .map((d) => ({ id: d.id, key: null, count: 1, items: [] })),
    );
  });

  test('a generated field all items share: one group holding every match', async () => {
    const cs: Cond[] = [{ kind: 'range', field: 'price', gte: 3, lte: 20 }];
    const r = await search(`q=${qOf(cs)}&group=image_width&group_size=4&sort=label&order=asc`);
    expect(r.status).toBe(200);
    const hits = modelOrder('label', 'asc').filter((d) => matches(d, cs));
    expect(r.body.total_groups).toBe(1);
    expect(r.body.total_results).toBe(hits.length);
    expect(shownPage(r.body.results)).toEqual([
      {
        id: hits[0]!.id,
        key: 'n:48',
        count: hits.length,
        items: hits.slice(1, 4).map((d) => d.id),
      },
    ]);
  });

  test('paging through every group page visits each matching group exactly once', async () => {
    const cases: Array<{ cs: Cond[]; sort: Sort; order?: Order; size: number }> = [
      { cs: [], sort: undefined, size: 1 },
      { cs: [], sort: 'price', order: 'asc', size: 3 },
      { cs: [], sort: 'label', order: 'desc', size: 2 },
      {
        cs: [{ kind: 'eq', field: 'tags', values: ['t1', 't2'] }],
        sort: undefined,
        order: 'asc',
        size: 2,
      },
      {
        cs: [{ kind: 'range', field: 'price', gte: 4, lte: 25 }],
        sort: 'price',
        order: 'desc',
        size: 1,
      },
    ];
    for (const { cs, sort, order, size } of cases) {
      const groups = modelGroups(cs, sort, order ?? 'desc');
      for (const limit of [2, 7, 50]) {
        const base =
          (cs.length ? `q=${qOf(cs)}&` : '') +
          `group=parent&group_size=${size}&limit=${limit}${sortQs(sort, order)}`;
        const seen: string[] = [];
        for (let page = 1; ; page++) {
          const qs = `${base}&page=${page}`;
          const r = await search(qs);
          expect([qs, r.status]).toEqual([qs, 200]);
          expect([qs, r.body.total_groups, r.body.total_groups_exact]).toEqual([
            qs,
            groups.length,
            true,
          ]);
          expect([qs, shownPage(r.body.results)]).toEqual([
            qs,
            modelPage(groups.slice((page - 1) * limit, page * limit), size),
          ]);
          for (const e of r.body.results as Entry[]) seen.push(gidOf(docOf(e.id)));
          if (r.body.results.length < limit) break;
        }
        expect([base, seen.length, new Set(seen).size]).toEqual([
          base,
          groups.length,
          groups.length,
        ]);
        expect(seen).toEqual(groups.map((g) => g.gid));
      }
    }
  }, 120_000);

  test('facets count groups; facet_scope=items counts items; stats stay over items', async () => {
    const cs: Cond[] = [
      { kind: 'eq', field: 'color', values: ['red', 'blue', 'Ärger'] },
      { kind: 'range', field: 'price', gte: 2, lte: 28 },
    ];
    const fs = 'color,tags,parent,instock,price';
    const qs = `q=${qOf(cs)}&group=parent&limit=5&facets=${fs}&disjunctive=color&facet_size=4&stats=price`;
    const g = await search(qs);
    expect([qs, g.status]).toEqual([qs, 200]);
    for (const f of fs.split(','))
      expect([f, g.body.facets[f]]).toEqual([f, modelFacet(cs, f, 4, f === 'color', 'groups')]);
    expect(g.body.stats.price).toEqual(modelStats(cs, 'price'));
    // the groups figures differ from the item figures somewhere (the property is not vacuous)
    const items = await search(`${qs}&facet_scope=items`);
    expect(items.status).toBe(200);
    for (const f of fs.split(','))
      expect([f, items.body.facets[f]]).toEqual([f, modelFacet(cs, f, 4, f === 'color', 'items')]);
    expect(items.body.facets).not.toEqual(g.body.facets);
    const explicit = await search(`${qs}&facet_scope=groups`);
    expect(explicit.body.facets).toEqual(g.body.facets);
    // a figures-only request: totals still counted
    const only = await search(`q=${qOf(cs)}&group=parent&limit=0&facets=tags`);
    expect([only.status, only.body.results, only.body.total_groups]).toEqual([
      200,
      [],
      modelGroups(cs, undefined, 'desc').length,
    ]);
  });

  test('property: random q, sort, order, paging, facets and scope equal the brute-force model', async () => {
    const parentTexts = ['p01', 'p02', 'p03', 'p10', '5', '7', '12', 'true', 'false', '2.5'];
    const cond: fc.Arbitrary<Cond> = fc.oneof(
      fc.record({
        kind: fc.constantFrom('eq' as const, 'not' as const),
        field: fc.constantFrom('color' as const),
        values: fc.subarray(COLORS, { minLength: 1, maxLength: 3 }),
      }),
      fc.record({
        kind: fc.constantFrom('eq' as const, 'not' as const),
        field: fc.constantFrom('tags' as const),
        values: fc.subarray(TAGS, { minLength: 1, maxLength: 2 }),
      }),
      fc.record({
        kind: fc.constantFrom('eq' as const, 'not' as const),
        field: fc.constantFrom('instock' as const),
        values: fc.subarray(['true', 'false'], { minLength: 1, maxLength: 1 }),
      }),
      fc.record({
        kind: fc.constantFrom('eq' as const, 'not' as const),
        field: fc.constantFrom('parent' as const),
        values: fc.subarray(parentTexts, { minLength: 1, maxLength: 4 }),
      }),
      fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 30 })).map(([a, b]) => ({
        kind: 'range' as const,
        field: 'price',
        gte: Math.min(a, b),
        lte: Math.max(a, b),
      })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(cond, { maxLength: 2, selector: (c) => c.field }),
        fc.constantFrom<Sort>(undefined, 'price', 'label'),
        fc.constantFrom<Order | undefined>(undefined, 'asc', 'desc'),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(0, 2, 5, 50),
        fc.integer({ min: 1, max: 4 }),
        fc.uniqueArray(fc.constantFrom('color', 'tags', 'parent', 'instock', 'price'), {
          maxLength: 3,
        }),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        fc.constantFrom<'groups' | 'items' | undefined>(undefined, 'groups', 'items'),
        async (cs, sort, order, size, rawLimit, rawPage, facets, facetSize, disj, scope) => {
          const limit = rawLimit === 0 && !facets.length ? 2 : rawLimit;
          const page = limit === 0 ? 1 : rawPage;
          const disjunctive = disj && facets.length ? facets[0] : undefined;
          const qs =
            `group=parent&group_size=${size}&limit=${limit}&page=${page}&stats=price` +
            sortQs(sort, order) +
            (cs.length ? `&q=${qOf(cs)}` : '') +
            (facets.length ? `&facets=${facets.join(',')}&facet_size=${facetSize}` : '') +
            (disjunctive ? `&disjunctive=${disjunctive}` : '') +
            (scope ? `&facet_scope=${scope}` : '');
          const r = await search(qs);
          expect([qs, r.status, r.body.error]).toEqual([qs, 200, undefined]);
          const groups = modelGroups(cs, sort, order ?? 'desc');
          expect([
            qs,
            r.body.total_results,
            r.body.total_groups,
            r.body.total_groups_exact,
          ]).toEqual([qs, docs.filter((d) => matches(d, cs)).length, groups.length, true]);
          expect([qs, shownPage(r.body.results)]).toEqual([
            qs,
            modelPage(groups.slice((page - 1) * limit, page * limit), size),
          ]);
          for (const f of facets)
            expect([qs, f, r.body.facets[f]]).toEqual([
              qs,
              f,
              modelFacet(cs, f, facetSize, f === disjunctive, scope ?? 'groups'),
            ]);
          expect([qs, r.body.stats.price]).toEqual([qs, modelStats(cs, 'price')]);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);

  test('bad group parameters are 400s naming the parameter', async () => {
    const cases: Array<[string, string]> = [
      ['group_size=2', 'group_size'],
      ['group=parent&group_size=0', 'group_size'],
      ['group=parent&group_size=11', 'group_size'],
      ['group=parent&group_size=x', 'group_size'],
      ['group=parent&group_size=1.5', 'group_size'],
      ['group=nosuch', 'group'],
      ['group=service_created_at', 'group'],
      ['group=service_updated_at', 'group'],
      ['facets=color&facet_scope=items', 'facet_scope'],
      ['facets=color&facet_scope=groups', 'facet_scope'],
      ['group=parent&facets=color&facet_scope=tiles', 'facet_scope'],
    ];
    for (const [qs, param] of cases) {
      const r = await search(qs);
      expect([qs, r.status, r.body.error?.code, r.body.error?.details?.[0]?.param]).toEqual([
        qs,
        400,
        'invalid_request',
        param,
      ]);
    }
    const unknown = await search('group=nosuch');
    expect(unknown.body.error.message).toContain('nosuch');
    // the same rules on the similarity requests
    const some = docs[0]!.id;
    const png = (await makeImage(3)).toString('base64');
    const similarity: Array<[string, string, string]> = [
      ['similar', `id=${some}&group_size=2`, 'group_size'],
      ['similar', `id=${some}&group=parent&group_size=11`, 'group_size'],
      ['similar', `id=${some}&group=nosuch`, 'group'],
      ['similar', `id=${some}&group=service_created_at`, 'group'],
      ['collection', `ids=${some}&group=parent&group_size=0`, 'group_size'],
      ['collection', `ids=${some}&group=nosuch`, 'group'],
      ['explore', `id=${some}&group=nosuch`, 'group'],
      ['explore', `id=${some}&group_size=3`, 'group_size'],
      ['explore', 'group=parent', 'group'], // a random start has no groups
      ['explore', 'group=parent&group_size=2', 'group'],
    ];
    for (const [path, qs, param] of similarity) {
      const r = await get(path, qs);
      expect([path, qs, r.status, r.body.error?.details?.[0]?.param]).toEqual([
        path,
        qs,
        400,
        param,
      ]);
    }
    for (const [qs, param] of [
      ['group=parent&group_size=11', 'group_size'],
      ['group=nosuch', 'group'],
      ['group_size=2', 'group_size'],
    ]) {
      const r = await t.call('POST', `${ds.base}/search?${qs}`, {
        token: ds.dsToken,
        body: { image: `data:image/png;base64,${png}` },
      });
      expect(['lens', qs, r.status, r.body.error?.details?.[0]?.param]).toEqual([
        'lens',
        qs,
        400,
        param,
      ]);
    }
  });
});

// ---- similarity requests -------------------------------------------------------------------

/**
 * What every grouped similarity answer must satisfy, whatever the vectors: one entry per group
 * (never a second item of a group anywhere on the page), the excluded groups and ids absent,
 * every shown item matching q, counts over the whole dataset, further items of the same group,
 * best first. Returns the entries after `skip` leading ones (the target of similar).
 */
function checkGroups(
  label: string,
  results: Entry[],
  p: {
    cs: Cond[];
    size: number;
    excludeIds: string[];
    excludeGid?: string;
    /** The entries are in similarity order (not explore's diversified one). */
    ordered: boolean;
    skip?: number;
  },
) {
  const matching = matchingByGroup(p.cs);
  const rest = results.slice(p.skip ?? 0);
  const shownIds = rest.flatMap((e) => [e.id, ...(e.group?.items ?? []).map((x) => x.id)]);
  expect([label, 'ids repeat', shownIds.length - new Set(shownIds).size]).toEqual([
    label,
    'ids repeat',
    0,
  ]);
  const gids = rest.map((e) => gidOf(docOf(e.id)));
  expect([label, 'a group twice', gids.length - new Set(gids).size]).toEqual([
    label,
    'a group twice',
    0,
  ]);
  for (const e of rest) {
    const d = docOf(e.id);
    const gid = gidOf(d);
    const ctx = [label, e.id];
    expect([...ctx, p.excludeIds.includes(e.id), gid === p.excludeGid]).toEqual([
      ...ctx,
      false,
      false,
    ]);
    expect([...ctx, 'matches q', matches(d, p.cs)]).toEqual([...ctx, 'matches q', true]);
    expect([...ctx, e.group && keyOfShown(e.group.value), e.group?.count]).toEqual([
      ...ctx,
      shownKey(d),
      gid.startsWith('own:') ? 1 : matching.get(gid)!.length,
    ]);
    if (p.size === 1) {
      expect([...ctx, e.group && 'items' in e.group]).toEqual([...ctx, false]);
      continue;
    }
    const items = e.group?.items ?? [];
    const available = (gid.startsWith('own:') ? [] : matching.get(gid)!).filter(
      (x) => x.id !== e.id && !p.excludeIds.includes(x.id),
    );
    expect([...ctx, items.map((x) => gidOf(docOf(x.id)))]).toEqual([...ctx, items.map(() => gid)]);
    expect([...ctx, items.length]).toEqual([...ctx, Math.min(p.size - 1, available.length)]);
    for (const x of items) {
      expect([...ctx, x.id, matches(docOf(x.id), p.cs), p.excludeIds.includes(x.id)]).toEqual([
        ...ctx,
        x.id,
        true,
        false,
      ]);
      expect([...ctx, x.id, x.score! <= e.score!]).toEqual([...ctx, x.id, true]);
    }
    const scores = items.map((x) => x.score!);
    expect([...ctx, scores]).toEqual([...ctx, [...scores].sort((a, b) => b - a)]);
  }
  if (p.ordered) {
    const scores = rest.map((e) => e.score!);
    expect([label, scores]).toEqual([label, [...scores].sort((a, b) => b - a)]);
  }
  return rest;
}

/** Groups that could be shown: matching items, not excluded, not in the excluded group. */
const availableGroups = (cs: Cond[], excludeIds: string[], excludeGid?: string) =>
  new Set(
    docs
      .filter((d) => matches(d, cs) && !excludeIds.includes(d.id) && gidOf(d) !== excludeGid)
      .map((d) => gidOf(d)),
  ).size;

/**
 * Against the same request ungrouped (limit 50): no item of an unshown group scores above the
 * page's last group when the page is full, no item of a shown group above its best item, and no
 * unshown group mate above the group's last shown mate when its items are full.
 */
function checkBest(
  label: string,
  grouped: Entry[],
  ungrouped: Entry[],
  full: boolean,
  size: number,
) {
  const shown = new Map(grouped.map((e) => [gidOf(docOf(e.id)), e]));
  const last = grouped.length ? grouped[grouped.length - 1]!.score! : 1;
  for (const x of ungrouped) {
    const gid = gidOf(docOf(x.id));
    const e = shown.get(gid);
    if (!e) {
      if (full)
        expect([label, 'a better group was left out', x.id, x.score! <= last]).toEqual([
          label,
          'a better group was left out',
          x.id,
          true,
        ]);
      continue;
    }
    expect([label, 'better than its group’s best', x.id, x.score! <= e.score!]).toEqual([
      label,
      'better than its group’s best',
      x.id,
      true,
    ]);
    const items = e.group?.items ?? [];
    if (size > 1 && items.length === size - 1 && x.id !== e.id && !items.some((i) => i.id === x.id))
      expect([
        label,
        'a nearer group mate was left out',
        x.id,
        x.score! <= items.at(-1)!.score!,
      ]).toEqual([label, 'a nearer group mate was left out', x.id, true]);
  }
}

describe(`grouped similarity requests (contract §13; catalogue seed ${SEED})`, () => {
  /** Targets of every kind: a big group, a collision group, a number, no parent, an array. */
  const targets = () => {
    const sizes = matchingByGroup([]);
    const big = [...sizes.entries()]
      .filter(([g]) => !g.startsWith('own:'))
      .sort((a, b) => b[1].length - a[1].length)[0]![1][0]!;
    return [
      big,
      docs.find((d) => d.md.parent === true)!,
      docs.find((d) => d.md.parent === 5)!,
      docs.find((d) => d.md.parent === undefined)!,
      docs.find((d) => Array.isArray(d.md.parent))!,
    ];
  };

  test('similar: the target first with its own group, then best items of other groups', async () => {
    const cases: Array<{ cs: Cond[]; limit: number; size: number }> = [
      { cs: [], limit: 10, size: 2 },
      { cs: [], limit: 50, size: 1 },
      { cs: [{ kind: 'not', field: 'color', values: ['red', 'blue'] }], limit: 25, size: 3 },
      { cs: [{ kind: 'eq', field: 'tags', values: ['t0', 't3'] }], limit: 50, size: 2 },
    ];
    for (const target of targets())
      for (const { cs, limit, size } of cases) {
        const q = cs.length ? `&q=${qOf(cs)}` : '';
        const qs = `id=${target.id}&group=parent&group_size=${size}&limit=${limit}${q}`;
        const r = await get('similar', qs);
        expect([qs, r.status]).toEqual([qs, 200]);
        const results = r.body.results as Entry[];
        const own = gidOf(target);
        const ownMatching = own.startsWith('own:') ? [] : (matchingByGroup(cs).get(own) ?? []);
        // the target, with its own group
        expect([
          qs,
          results[0]!.id,
          results[0]!.group && keyOfShown(results[0]!.group.value),
        ]).toEqual([qs, target.id, shownKey(target)]);
        expect([qs, 'own count', results[0]!.group!.count]).toEqual([
          qs,
          'own count',
          own.startsWith('own:') ? 1 : ownMatching.length,
        ]);
        if (size === 1) expect([qs, 'items' in results[0]!.group!]).toEqual([qs, false]);
        else {
          const mates = results[0]!.group!.items!;
          const available = ownMatching.filter((d) => d.id !== target.id);
          expect([qs, 'own mates', mates.length]).toEqual([
            qs,
            'own mates',
            Math.min(size - 1, available.length),
          ]);
          for (const m of mates)
            expect([
              qs,
              m.id,
              gidOf(docOf(m.id)),
              matches(docOf(m.id), cs),
              m.id === target.id,
            ]).toEqual([qs, m.id, own, true, false]);
        }
        // the rest: other groups only, never the target's own, never an item of a group twice
        const rest = checkGroups(qs, results, {
          cs,
          size,
          excludeIds: [target.id, ...(results[0]!.group!.items ?? []).map((x) => x.id)],
          excludeGid: own,
          ordered: true,
          skip: 1,
        });
        const possible = availableGroups(cs, [target.id], own);
        expect([qs, 'entries', rest.length]).toEqual([
          qs,
          'entries',
          Math.min(limit - 1, possible),
        ]);
        const flat = await get('similar', `id=${target.id}&limit=50${q}`);
        expect(flat.status).toBe(200);
        checkBest(
          qs,
          rest,
          (flat.body.results as Entry[]).slice(1).filter((x) => gidOf(docOf(x.id)) !== own),
          rest.length === limit - 1,
          size,
        );
      }
  }, 120_000);

  test('collection: one entry per group, the inputs never shown', async () => {
    const sizes = matchingByGroup([]);
    const multi = [...sizes.values()].filter((g) => g.length >= 3);
    const ids = [
      multi[0]![0]!.id,
      multi[1]![1]!.id,
      docs.find((d) => d.md.parent === undefined)!.id,
    ];
    for (const [cs, size, limit] of [
      [[], 2, 20],
      [[{ kind: 'range', field: 'price', gte: 5, lte: 25 }], 3, 50],
    ] as Array<[Cond[], number, number]>) {
      const q = cs.length ? `&q=${qOf(cs)}` : '';
      const qs = `ids=${ids.join(',')}&group=parent&group_size=${size}&limit=${limit}${q}`;
      const r = await get('collection', qs);
      expect([qs, r.status]).toEqual([qs, 200]);
      const rest = checkGroups(qs, r.body.results, { cs, size, excludeIds: ids, ordered: true });
      expect([qs, rest.length]).toEqual([qs, Math.min(limit, availableGroups(cs, ids))]);
      const flat = await get('collection', `ids=${ids.join(',')}&limit=50${q}`);
      expect(flat.status).toBe(200);
      checkBest(qs, rest, flat.body.results, rest.length === limit, size);
    }
  });

  test('lens: one entry per group', async () => {
    const png = (await makeImage(N + 7)).toString('base64');
    for (const [cs, size, limit] of [
      [[], 1, 30],
      [[{ kind: 'eq', field: 'color', values: ['green', 'zeta', 'Ärger'] }], 2, 12],
    ] as Array<[Cond[], number, number]>) {
      const q = cs.length ? `&q=${qOf(cs)}` : '';
      const lens = (qs: string) =>
        t.call('POST', `${ds.base}/search?${qs}`, {
          token: ds.dsToken,
          body: { image: `data:image/png;base64,${png}` },
        });
      const qs = `group=parent&group_size=${size}&limit=${limit}${q}`;
      const r = await lens(qs);
      expect([qs, r.status]).toEqual([qs, 200]);
      const rest = checkGroups(`lens ${qs}`, r.body.results, {
        cs,
        size,
        excludeIds: [],
        ordered: true,
      });
      expect([qs, rest.length]).toEqual([qs, Math.min(limit, availableGroups(cs, []))]);
      const flat = await lens(`limit=50${q}`);
      expect(flat.status).toBe(200);
      checkBest(`lens ${qs}`, rest, flat.body.results, rest.length === limit, size);
    }
  });

  test('explore with id: one entry per group, the selection never shown', async () => {
    for (const target of targets()) {
      const qs = `id=${target.id}&group=parent&group_size=2&limit=12`;
      const r = await get('explore', qs);
      expect([qs, r.status]).toEqual([qs, 200]);
      const rest = checkGroups(qs, r.body.results, {
        cs: [],
        size: 2,
        excludeIds: [target.id],
        ordered: false,
      });
      expect([qs, rest.length]).toEqual([qs, 12]);
      // a journey's earlier selections are never shown either
      const next = rest[0]!.id;
      const qs2 = `id=${next}&path=${target.id}&group=parent&limit=10&q=${qOf([
        { kind: 'not', field: 'color', values: ['red'] },
      ])}`;
      const r2 = await get('explore', qs2);
      expect([qs2, r2.status]).toEqual([qs2, 200]);
      const rest2 = checkGroups(qs2, r2.body.results, {
        cs: [{ kind: 'not', field: 'color', values: ['red'] }],
        size: 1,
        excludeIds: [target.id, next],
        ordered: false,
      });
      expect([qs2, rest2.length]).toEqual([qs2, 10]);
    }
  });

  test('explore_url carries group and group_size: a journey stays grouped', async () => {
    const target = targets()[0]!;
    const r = await get('similar', `id=${target.id}&group=parent&group_size=2&limit=5`);
    const next = new URL(r.body.results[1].explore_url as string);
    expect(next.searchParams.get('group')).toBe('parent');
    expect(next.searchParams.get('group_size')).toBe('2');
    const followed = await t.call('GET', `${next.pathname}${next.search}`, { token: ds.dsToken });
    expect(followed.status).toBe(200);
    checkGroups(next.search, followed.body.results, {
      cs: [],
      size: 2,
      excludeIds: [next.searchParams.get('id')!],
      ordered: false,
    });
    const plain = await get('search', 'group=parent&limit=3');
    for (const e of plain.body.results as Array<{ explore_url: string }>)
      expect(new URL(e.explore_url).searchParams.get('group')).toBe('parent');
  });
});
