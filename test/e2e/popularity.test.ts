/**
 * Contract §14 on whichever engine the project runs (embedded, or Elasticsearch + RabbitMQ with
 * two API hosts): track events become service_popularity / service_purchases, which every
 * query path reads like the other generated fields. Expected values come from a model of the
 * events this test sends (random, seeded), never from the service.
 */
import { LIMITS } from '../../src/domain/limits';
import { gql } from '../helpers/graphql';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

const N = 200;
const DAY = 86_400_000;
const ids = Array.from({ length: N }, (_, i) => `p-${String(i).padStart(3, '0')}`);

/** A small seeded generator: the same events every run, none written by hand. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

interface Counts {
  popularity: number;
  purchases: number;
}

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
/** What the service should show for every id, from the events sent. */
const model = new Map<string, Counts>();
const expected = (id: string): Counts => model.get(id) ?? { popularity: 0, purchases: 0 };
/** service_updated_at of every item before any event counted. */
const updatedBefore = new Map<string, string>();

const search = (qs: string) => t.call('GET', `${ds.base}/search?${qs}`, { token: ds.dsToken });
const track = (qs: string, body?: unknown) =>
  t.call('POST', `${ds.base}/track${qs}`, {
    token: ds.dsToken,
    ...(body === undefined ? {} : { body }),
  });

/** Every item with the two fields and its update time, by id (four pages of 50). */
async function everyItem(): Promise<Map<string, Counts & { updated: string }>> {
  const out = new Map<string, Counts & { updated: string }>();
  for (let page = 1; page <= Math.ceil(N / 50) + 1; page++) {
    const r = await search(
      `limit=50&page=${page}&sort=service_created_at&order=asc&fields=service_popularity,service_purchases,service_updated_at`,
    );
    expect(r.status).toBe(200);
    for (const e of r.body.results as Array<{ id: string; metadata: Record<string, any> }>)
      out.set(e.id, {
        popularity: e.metadata.service_popularity,
        purchases: e.metadata.service_purchases,
        updated: e.metadata.service_updated_at,
      });
    if (r.body.results.length < 50) break;
  }
  return out;
}

/** True once every item shows the model's counts (asked once a second: four searches each). */
async function allMatch(): Promise<boolean> {
  await new Promise((r) => setTimeout(r, 1000));
  const items = await everyItem();
  return (
    items.size >= N &&
    [...items].every(
      ([id, c]) =>
        c.popularity === expected(id).popularity && c.purchases === expected(id).purchases,
    )
  );
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  const content = ids.map((id, i) => ({
    id,
    url: `${img.url}/img/${i}.png`,
    metadata: { n: i },
  }));
  const r = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
}, 180_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

test('before any event both fields are 0 on every item, returned only when asked for', async () => {
  const items = await everyItem();
  expect(items.size).toBe(N);
  for (const [id, c] of items) {
    expect([id, c.popularity, c.purchases]).toEqual([id, 0, 0]);
    updatedBefore.set(id, c.updated);
  }
  const plain = await search('limit=2&fields=n');
  expect(Object.keys(plain.body.results[0].metadata)).toEqual(['n']);
  const all = await search('limit=2&fields=*');
  expect(all.body.results[0].metadata).toMatchObject({
    service_popularity: 0,
    service_purchases: 0,
  });
  // zeros are values: a range from 0 matches every item
  expect((await search('q=service_popularity:0:0&limit=2')).body.total_results).toBe(N);
});

test('a bad qty or a timestamp more than 5 minutes ahead is a 400 naming it; nothing recorded', async () => {
  const now = t.clock.now();
  const cases: Array<[string, unknown, Record<string, unknown>]> = [
    ['?v=a:purchase,id:p-001,qty:0', undefined, { param: 'v', field: 'qty', value: '0' }],
    ['?v=a:purchase,id:p-001,qty:two', undefined, { param: 'v', field: 'qty', value: 'two' }],
    ['?v=a:purchase,id:p-001,qty:1.5', undefined, { param: 'v', field: 'qty' }],
    [
      '',
      { events: [{ v: 'a:click,id:p-001' }, { v: 'a:purchase,id:p-1,qty:-3' }] },
      { index: 1, field: 'qty' },
    ],
    [
      '',
      { events: [{ v: 'a:click,id:p-001', timestamp: new Date(now + 6 * 60_000).toISOString() }] },
      { index: 0, field: 'timestamp' },
    ],
  ];
  for (const [qs, body, detail] of cases) {
    const r = await track(qs, body);
    expect([qs, r.status, r.body.error.details]).toEqual([
      qs,
      400,
      expect.arrayContaining([expect.objectContaining(detail)]),
    ]);
  }
});

test('clicks and purchases (with qty) of the trailing 30 days show within 60 s, on every path', async () => {
  const rand = rng(14);
  const now = t.clock.now();
  const events: Array<{ v: string; timestamp?: string }> = [];
  const add = (id: string, kind: 'click' | 'purchase', qty?: number, at?: number) => {
    const tooOld = at !== undefined && at < now - LIMITS.popularityWindowMs;
    events.push({
      v: `a:${kind},id:${id}${qty !== undefined ? `,qty:${qty}` : ''},page_view_id:pv${events.length}`,
      ...(at !== undefined ? { timestamp: new Date(at).toISOString() } : {}),
    });
    if (tooOld) return;
    const c = { ...expected(id) };
    if (kind === 'click') c.popularity++;
    else c.purchases += qty ?? 1;
    model.set(id, c);
  };
  for (let i = 0; i < 60; i++) {
    const id = ids[Math.floor(rand() * 40)]!;
    const k = 1 + Math.floor(rand() * 4);
    for (let j = 0; j < k; j++) add(id, 'click', undefined, now - Math.floor(rand() * 20 * DAY));
    if (rand() < 0.5) add(id, 'purchase', rand() < 0.3 ? undefined : 1 + Math.floor(rand() * 5));
  }
  // 31 days ago: never counted; 29 days 23 hours ago: counted until it turns 30 days old
  add('p-050', 'click', undefined, now - 31 * DAY);
  add('p-051', 'purchase', 7, now - 31 * DAY);
  add('p-052', 'click', undefined, now - 30 * DAY + 3_600_000);
  // a little ahead of the server's clock (a client's skew) is accepted and counts
  add('p-053', 'purchase', 2, now + 4 * 60_000);
  // an id no item has yet, and another action: neither disturbs anything
  events.push({ v: 'a:click,id:not-an-item' }, { v: 'a:view,id:p-000' });
  for (let i = 0; i < events.length; i += 100) {
    const r = await track('', { events: events.slice(i, i + 100) });
    expect(r.status).toBe(202);
  }
  // one given as the request's own v
  expect((await track('?v=a:click,id:p-060')).status).toBe(202);
  model.set('p-060', { popularity: 1, purchases: 0 });

  await waitFor('every item to show the event log counts', allMatch, 60_000);

  // tracking never changes service_updated_at
  const items = await everyItem();
  for (const [id, c] of items) expect([id, c.updated]).toEqual([id, updatedBefore.get(id)]);
}, 120_000);

test('sort, q ranges, stats, facets and histograms read the counts like any generated field', async () => {
  const pops = ids.map((id) => expected(id).popularity);
  const purchases = ids.map((id) => expected(id).purchases);
  const sorted = await search(
    'sort=service_popularity&order=desc&limit=20&fields=service_popularity',
  );
  expect(sorted.body.results.map((e: any) => e.metadata.service_popularity)).toEqual(
    [...pops].sort((a, b) => b - a).slice(0, 20),
  );
  const asc = await search(
    'sort=service_purchases&order=asc&limit=20&page=10&fields=service_purchases',
  );
  expect(asc.body.results.map((e: any) => e.metadata.service_purchases)).toEqual(
    [...purchases].sort((a, b) => a - b).slice(180, 200),
  );
  for (const min of [1, 3, 6]) {
    const r = await search(`q=service_popularity:${min}:&limit=2`);
    expect([min, r.body.total_results]).toEqual([min, pops.filter((p) => p >= min).length]);
  }
  const r = await search(
    'limit=2&stats=service_purchases,service_popularity&histogram=service_popularity:2&facets=service_purchases&facet_size=3',
  );
  expect(r.status).toBe(200);
  const stats = (ns: number[]) => ({
    count: ns.length,
    min: Math.min(...ns),
    max: Math.max(...ns),
    sum: ns.reduce((s, n) => s + n, 0),
    avg: ns.reduce((s, n) => s + n, 0) / ns.length,
  });
  expect(r.body.stats.service_purchases).toEqual(stats(purchases));
  expect(r.body.stats.service_popularity).toEqual(stats(pops));
  const buckets: Array<{ from: number; to: number; count: number }> = [];
  for (let from = 0; from <= Math.max(...pops); from += 2)
    buckets.push({
      from,
      to: from + 2,
      count: pops.filter((p) => p >= from && p < from + 2).length,
    });
  expect(r.body.histograms.service_popularity).toEqual(buckets);
  const byValue = new Map<number, number>();
  for (const p of purchases) byValue.set(p, (byValue.get(p) ?? 0) + 1);
  const top = [...byValue].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  expect(r.body.facets.service_purchases).toEqual({
    buckets: top.slice(0, 3).map(([value, count]) => ({ value: String(value), count })),
    other: top.slice(3).reduce((s, [, c]) => s + c, 0),
    missing: 0,
  });
});

test('GraphQL: VisionItem.servicePopularity / servicePurchases, sort by the REST names', async () => {
  const res = await gql<any, any>(
    t.url,
    `query ($o: String!, $d: String!) { vision(organisation: $o, dataset: $d) {
       search(sort: "service_purchases", order: DESC, limit: 10) {
         results { id servicePopularity servicePurchases } } } }`,
    { o: 'acme', d: 'shoes' },
    ds.dsToken,
  );
  expect(res.errors).toBeUndefined();
  const results = res.data.vision.search.results as Array<{
    id: string;
    servicePopularity: number;
    servicePurchases: number;
  }>;
  const want = ids
    .map((id) => expected(id).purchases)
    .sort((a, b) => b - a)
    .slice(0, 10);
  expect(results.map((e) => e.servicePurchases)).toEqual(want);
  for (const e of results)
    expect([e.id, e.servicePopularity, e.servicePurchases]).toEqual([
      e.id,
      expected(e.id).popularity,
      expected(e.id).purchases,
    ]);
});

test('counts survive the item being pushed again (metadata, or a new url) and start from the log for a new item', async () => {
  const hot = [...model].filter(([, c]) => c.popularity > 0).map(([id]) => id);
  const [a, b] = [hot[0]!, hot[1]!];
  // an id tracked before it is in the dataset, with a click on a known item: once that shows,
  // the pass that counted it has counted the new id too
  const tracked = await track('', {
    events: [{ v: 'a:click,id:late-1' }, { v: 'a:click,id:late-1' }, { v: 'a:click,id:p-199' }],
  });
  expect(tracked.status).toBe(202);
  model.set('late-1', { popularity: 2, purchases: 0 });
  model.set('p-199', { ...expected('p-199'), popularity: expected('p-199').popularity + 1 });
  await waitFor('the new events counted', allMatch, 60_000);
  const r = await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: {
      content: [
        { id: a, url: `${img.url}/img/${ids.indexOf(a)}.png`, metadata: { n: -1 } },
        { id: b, url: `${img.url}/img/${ids.indexOf(b)}.png?again`, metadata: { n: -2 } },
        { id: 'late-1', url: `${img.url}/img/7.png?late`, metadata: { n: 1000 } },
      ],
    },
  });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N + 1);
  const want = {
    [a]: [expected(a).popularity, expected(a).purchases],
    [b]: [expected(b).popularity, expected(b).purchases],
    'late-1': [2, 0],
  };
  let got: Record<string, number[]> = {};
  await waitFor(
    'the pushed items to show their counts',
    async () => {
      await new Promise((r) => setTimeout(r, 500));
      const details = await t.call(
        'GET',
        `${ds.base}/content/details?ids=${a},${b},late-1&fields=service_popularity,service_purchases`,
        { token: ds.dsToken },
      );
      got = Object.fromEntries(
        (details.body.results as Array<{ id: string; metadata: Record<string, number> }>).map(
          (e) => [e.id, [e.metadata.service_popularity, e.metadata.service_purchases]],
        ),
      );
      return JSON.stringify(got) === JSON.stringify(want);
    },
    60_000,
  ).catch(() => expect(got).toEqual(want));
}, 120_000);

test('an event stops counting once it is 30 days old', async () => {
  expect(expected('p-052').popularity).toBeGreaterThan(0);
  // p-052's click was 29 days 23 hours old; an hour and a pass later it is past the window
  t.clock.advance(3_600_000 + LIMITS.popularityPassMs);
  const c = expected('p-052');
  model.set('p-052', { ...c, popularity: c.popularity - 1 });
  await waitFor(
    'p-052 to lose its aged click',
    async () => {
      await new Promise((r) => setTimeout(r, 500));
      const r = await search('q=n:52&fields=service_popularity&limit=2');
      return r.body.results[0]?.metadata.service_popularity === expected('p-052').popularity;
    },
    60_000,
  );
});
