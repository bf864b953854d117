/**
 * Group facets on Elasticsearch in the cases only it has (contract §13): counted per group in
 * partitions, which must add up to the same figures however many there are; and estimated, and
 * flagged, above the exact bound. What every engine shares is in test/e2e/groups.test.ts.
 */
import { esClient } from '../../../src/adapters/elasticsearch/client';
import { esPorts } from '../../../src/adapters/elasticsearch/es-ports';
import { groupFacets, groupTotals, type Search } from '../../../src/adapters/elasticsearch/groups';
import { EsIndices } from '../../../src/adapters/elasticsearch/indices';
import type { FiguresSpec } from '../../../src/domain/figures';
import { groupKey } from '../../../src/domain/group';
import type { Metadata } from '../../../src/domain/metadata';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T0 = Date.UTC(2026, 0, 1);
const DIMS = 8;
const client = esClient(ES_URL);
const prefix = `g${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
const COLORS = ['red', 'blue', 'green', 'true'];

/** 300 items: parents of 1–5 items (strings, numbers, a boolean), some alone, arrays of sizes. */
const items: Array<{ id: string; metadata: Metadata }> = Array.from({ length: 300 }, (_, i) => {
  const md: Metadata = { sizes: [`s${i % 3}`, `s${(i * 7) % 4}`] };
  const p = Math.floor(i / 3);
  if (i % 17 === 0) md.parent = [`p${p}`];
  else if (i % 13 !== 0) md.parent = p % 4 === 0 ? p : p % 9 === 0 ? true : `p${p}`;
  if (i % 5 !== 0) md.color = i % 11 === 0 ? true : COLORS[i % 3]!;
  return { id: `i${i}`, metadata: md };
});

const search: Search = (body, filterPath) =>
  client.search({
    index: indices.items('d'),
    ...body,
    ...(filterPath ? { filter_path: filterPath } : {}),
  } as never) as never;

const spec = (exactUpTo: number): FiguresSpec & { groupBy: string } => ({
  facets: [
    { field: 'color', disjunctive: false },
    { field: 'sizes', disjunctive: false },
  ],
  facetSize: 10,
  stats: [],
  histograms: [],
  groupBy: 'parent',
  exactUpTo,
});

/** Per facet value text, the groups holding it; and the groups with an item lacking the field. */
function bruteForce(field: string): { counts: Record<string, number>; missing: number } {
  const groupOf = (i: number) => groupKey(items[i]!.metadata.parent) ?? `alone:${i}`;
  const holders = new Map<string, Set<string>>();
  const lacking = new Set<string>();
  items.forEach((it, i) => {
    const v = it.metadata[field];
    if (v === undefined) lacking.add(groupOf(i));
    for (const e of Array.isArray(v) ? v : v === undefined ? [] : [v]) {
      const text = String(e);
      if (!holders.has(text)) holders.set(text, new Set());
      holders.get(text)!.add(groupOf(i));
    }
  });
  return {
    counts: Object.fromEntries([...holders].map(([k, s]) => [k, s.size])),
    missing: lacking.size,
  };
}

beforeAll(async () => {
  const { content } = esPorts(indices, { vectorDims: DIMS });
  const jobs = await content.applyWrites(
    'd',
    items.map((it) => ({ id: it.id, url: `https://img.test/${it.id}.png`, metadata: it.metadata })),
    'post',
    T0,
  );
  const features = {
    width: 4,
    height: 3,
    format: 'png' as const,
    vector: Array.from({ length: DIMS }, (_, i) => (i === 0 ? 1 : 0)),
    embedder: 'test-emb',
  };
  for (const job of jobs) expect(await content.markProcessed(job, features, T0 + 1)).toBe(true);
  await client.indices.refresh({ index: indices.items('d') });
}, 120_000);

afterAll(async () => {
  await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
  await client.indices.deleteIndexTemplate({ name: `${prefix}items` }).catch(() => undefined);
  await client.close();
});

test('group facets add up to the same exact figures in one partition or in many', async () => {
  const one = await groupFacets(search, [], spec(10_000));
  const many = await groupFacets(search, [], spec(10_000), 7);
  expect(many).toEqual(one);
  for (const field of ['color', 'sizes']) {
    const want = bruteForce(field);
    const f = one[field]!;
    expect(f.exact).toBeUndefined();
    expect(Object.fromEntries(f.buckets.map((b) => [b.value, b.count]))).toEqual(want.counts);
    expect(f.missing).toBe(want.missing);
    expect(f.other).toBe(0);
  }
});

test('above the exact bound, totals and group facets are estimates and say so', async () => {
  const groups = new Set(items.map((it, i) => groupKey(it.metadata.parent) ?? `alone:${i}`));
  const exact = await groupTotals(search, [], 'parent', 10_000);
  expect(exact).toEqual({ total: 300, totalGroups: groups.size, totalGroupsExact: true });
  const over = await groupTotals(search, [], 'parent', 20);
  expect(over.totalGroupsExact).toBe(false);
  expect(over.totalGroups).toBeGreaterThan(20);
  const estimated = await groupFacets(search, [], spec(20));
  for (const field of ['color', 'sizes']) {
    expect(estimated[field]!.exact).toBe(false);
    // far below HyperLogLog++'s precision threshold: the estimates are the counts here
    const want = bruteForce(field);
    for (const b of estimated[field]!.buckets)
      expect(Math.abs(b.count - want.counts[b.value]!)).toBeLessThanOrEqual(1);
  }
});
