/**
 * GET …/analytics (contract §11) end to end, on whichever engine the project runs: real
 * requests and tracked events go in through REST, the report comes out of REST and GraphQL.
 * The definitions themselves are checked against a model in test/contract/report.test.ts.
 */
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';

const N = 200;
let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  const content = Array.from({ length: N }, (_, i) => ({
    id: `r-${i}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { colour: i % 2 ? 'red' : 'blue', n: i },
  }));
  expect(
    (await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } })).status,
  ).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
}, 180_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

const vision = (path: string) => t.call('GET', `${ds.base}/${path}`, { token: ds.dsToken });
const track = (v: string) =>
  t.call('POST', `${ds.base}/track?v=${encodeURIComponent(v)}`, { token: ds.dsToken });
const report = (qs = '') => t.call('GET', `${ds.base}/analytics${qs}`, { token: ds.orgToken });

test('requests and tracked events come back as the report of contract §11', async () => {
  const day = new Date().toISOString().slice(0, 10);
  expect((await vision('search?q=colour:red&sort=n&limit=5&v=page_view_id:s1')).status).toBe(200);
  expect((await vision('search?q=colour:red|blue,n:0:9&limit=5')).status).toBe(200);
  const none = await vision('search?q=colour:green');
  expect([none.status, none.body.total_results]).toEqual([200, 0]);
  const similar = await vision('similar?id=r-1&limit=4&v=page_view_id:pv1');
  expect(similar.status).toBe(200);
  const shownIds: string[] = similar.body.results.map((r: { id: string }) => r.id).slice(1);
  const collection = await vision('collection?ids=r-3,r-5&limit=3&v=page_view_id:pv2');
  expect(collection.status).toBe(200);
  const notShown = Array.from({ length: N }, (_, i) => `r-${i}`).find(
    (id) => !shownIds.includes(id) && id !== 'r-1',
  )!;
  // two click-throughs on similar, one click on an id it did not show, one on another page
  for (const v of [
    `a:click,id:${shownIds[0]},page_view_id:pv1`,
    `a:click,id:${shownIds[1]},page_view_id:pv1`,
    `a:click,id:${notShown},page_view_id:pv1`,
    `a:click,id:${shownIds[0]},page_view_id:elsewhere`,
    `a:add_to_cart,id:${shownIds[0]},page_view_id:pv1`,
  ])
    expect((await track(v)).status).toBe(202);

  const body = await waitFor('every event in the report', async () => {
    const r = await report(`?from=${day}&interval=day`);
    expect(r.status).toBe(200);
    const i = r.body.analytics.intervals.at(-1);
    // each API host batches its log writes: wait until every one of them is visible
    return (
      i?.events.click === 4 &&
      i.events.add_to_cart === 1 &&
      i.requests.search === 3 &&
      i.requests.similar === 1 &&
      i.requests.collection === 1 &&
      r.body.analytics
    );
  });
  expect(body.interval).toBe('day');
  expect(body.from).toBe(`${day}T00:00:00.000Z`);
  expect(body.intervals).toHaveLength(1);
  expect(body.intervals[0]).toEqual({
    from: `${day}T00:00:00.000Z`,
    to: body.to,
    requests: { search: 3, similar: 1, collection: 1 },
    events: { click: 4, add_to_cart: 1 },
    searches: 3,
    zero_result_searches: 1,
  });
  expect(body.searches).toEqual({ count: 3, zero_results: 1, zero_result_share: 0.333333 });
  expect(body.top_filters.slice(0, 3)).toEqual([
    { filter: 'colour', count: 3 },
    { filter: 'colour:red', count: 2 },
    { filter: 'colour:blue', count: 1 },
  ]);
  expect(body.top_filters).toEqual(
    expect.arrayContaining([
      { filter: 'n', count: 1 },
      { filter: 'colour:green', count: 1 },
    ]),
  );
  expect(body.top_sort_fields).toEqual([{ field: 'n', count: 1 }]);
  expect(body.top_clicked_ids[0]).toEqual({ id: shownIds[0], count: 2 });
  expect(body.click_through).toEqual({
    similar: { shown: 1, clicks: 2, rate: 2 },
    explore: { shown: 0, clicks: 0, rate: null },
    collection: { shown: 1, clicks: 0, rate: 0 },
  });

  const g = await gql<
    {
      organisation: {
        dataset: {
          analytics: {
            searches: number;
            zeroResultShare: number;
            topSortFields: Array<{ value: string; count: number }>;
            clickThrough: Array<{ type: string; shown: number; clicks: number }>;
            intervals: Array<{ events: Array<{ name: string; count: number }> }>;
          };
        };
      };
    },
    object
  >(
    t.url,
    `query($from: String) { organisation(name: "acme") { dataset(name: "shoes") {
       analytics(from: $from, interval: DAY, top: 3) {
         searches zeroResultShare topSortFields { value count }
         clickThrough { type shown clicks } intervals { events { name count } } } } } }`,
    { from: day },
    ds.orgToken,
  );
  expect(g.errors).toBeUndefined();
  const a = g.data!.organisation.dataset.analytics;
  expect([a.searches, a.zeroResultShare, a.topSortFields]).toEqual([
    3,
    0.333333,
    [{ value: 'n', count: 1 }],
  ]);
  expect(a.clickThrough).toContainEqual({ type: 'SIMILAR', shown: 1, clicks: 2 });
  expect(a.intervals[0]!.events).toEqual(expect.arrayContaining([{ name: 'click', count: 4 }]));
}, 60_000);

test('GraphQL track records events like REST', async () => {
  const g = await gql<{ track: number }, object>(
    t.url,
    `mutation { track(organisation: "acme", dataset: "shoes",
       events: [{ v: "a:wishlist,id:r-2" }, { v: "a:wishlist,id:r-4", timestamp: "2026-01-05T10:00:00Z" },
         { v: "a:wishlist,id:r-6", timestamp: "1767607200000" }]) }`,
    {},
    ds.dsToken,
  );
  expect(g.errors).toBeUndefined();
  expect(g.data!.track).toBe(3); // ISO 8601 and epoch ms (2026-01-05T10:00:00Z) alike
  const r = await waitFor('the January event in the report', async () => {
    const b = (await report('?from=2026-01-01&to=2026-02-01&interval=week')).body.analytics;
    return b.intervals.some((i: { events: Record<string, number> }) => i.events.wishlist) && b;
  });
  // weeks start on Monday: 2025-12-29 holds 2026-01-01; the event is in the week of 01-05
  expect(r.from).toBe('2025-12-29T00:00:00.000Z');
  expect(r.intervals.map((i: { events: Record<string, number> }) => i.events)).toEqual([
    {},
    { wishlist: 2 },
    {},
    {},
    {},
  ]);
  const bad = await gql<unknown, object>(
    t.url,
    `mutation { track(organisation: "acme", dataset: "shoes", events: [{ v: "id:r-2" }]) }`,
    {},
    ds.dsToken,
  );
  expect(onlyError(bad).extensions).toMatchObject({ code: 'invalid_request' });
});

test('bad report parameters are a 400 naming the parameter; the Vision token cannot read it', async () => {
  const cases: Array<[string, string]> = [
    ['?interval=fortnight', 'interval'],
    ['?from=last%20week', 'from'],
    ['?to=soon', 'to'],
    ['?from=2026-02-01&to=2026-01-01', 'from'],
    ['?top=0', 'top'],
    ['?top=101', 'top'],
    ['?from=2020-01-01&to=2026-01-01&interval=hour', 'interval'],
    ['?from=9999999999999999&interval=month', 'from'],
    ['?to=99999999999999999', 'to'],
  ];
  for (const [qs, param] of cases) {
    const r = await report(qs);
    expect([qs, r.status, r.body.error?.details?.[0]?.param]).toEqual([qs, 400, param]);
  }
  const asVision = await t.call('GET', `${ds.base}/analytics`, { token: ds.dsToken });
  expect(asVision.status).toBe(403);
  const missing = await t.call('GET', '/orgs/acme/datasets/nope/analytics', {
    token: ds.orgToken,
  });
  expect(missing.status).toBe(404);
});
