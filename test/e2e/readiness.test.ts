/**
 * Contract §2: the Vision API needs 200 processed items. A dataset found ready is taken as ready
 * for a moment (a count search per request is saved on Elasticsearch), but this host's own
 * writes are seen at once: a delete or a url change that takes it below 200 answers 409 at once
 * on the host that made it, and within the 2 s window of contract §12 on the others.
 */
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

/** Contract §12: how long another host may still act on what it read before a change. */
const WINDOW_MS = 2000;

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

// one API host at a time, not t.call's turns over the production installation's two
const search = (host = 0) => t.callOn(host, 'GET', `${ds.base}/search`, { token: ds.dsToken });
const similar = (host = 0) =>
  t.callOn(host, 'GET', `${ds.base}/similar?id=r-001&limit=3`, { token: ds.dsToken });

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  const content = Array.from({ length: 200 }, (_, i) => ({
    id: `r-${String(i).padStart(3, '0')}`,
    url: `${img.url}/img/${i}.png`,
  }));
  const r = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, 200);
}, 120_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

test('a delete that leaves 199 processed items answers 409 at once; a url change too', async () => {
  // The installation's clock stands still while the hosts' memos are looked at: nothing they
  // read expires until the test moves the clock on.
  t.clock.hold();
  try {
    // ready, and remembered so, on every host
    for (const host of [0, 1]) {
      expect((await search(host)).status).toBe(200);
      expect((await similar(host)).status).toBe(200);
    }
    // A delete is searchable when it is answered (the item writer refreshes the index), so a
    // count read after it on any host finds 199.
    const del = await t.callOn(0, 'DELETE', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { ids: ['r-199'] },
    });
    expect(del.status).toBe(202);
    for (const r of [await search(), await similar()]) {
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe('dataset_not_ready');
    }
    // The production installation's other API host still answers from what it read before the
    // delete (ReadinessMemo); 1 ms short of the 2 s window of contract §12 that has expired and
    // it counts again. (The embedded installation has one host: `search(1)` asks host 0.)
    if (t.hosts.filter((h) => h.url).length > 1) expect((await search(1)).status).toBe(200);
    t.clock.advance(WINDOW_MS - 1);
    const late = await search(1);
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('dataset_not_ready');
  } finally {
    t.clock.release();
  }
  // back to 200 processed: ready again at once ("not ready" is never remembered)
  await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: [{ id: 'r-199', url: `${img.url}/img/199.png` }] },
  });
  await waitProcessed(t, ds.base, ds.orgToken, 200);
  expect((await search()).status).toBe(200);
  // a url change makes an item pending again (its new image is slow to come): 199 processed
  const put = await t.callOn(0, 'POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: [{ id: 'r-000', url: `${img.url}/delayed/0.png?ms=20000` }] },
  });
  expect(put.status).toBe(202);
  const r = await search();
  expect(r.status).toBe(409);
  expect(r.body.error.code).toBe('dataset_not_ready');
}, 120_000);

test('a settings change made on another host applies to the Vision API at once, both ways', async () => {
  // the last test's slow image (past the fetch deadline) replaced: 200 processed again
  await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: [{ id: 'r-000', url: `${img.url}/img/0.png` }] },
  });
  await waitProcessed(t, ds.base, ds.orgToken, 200);
  // one item with an array field, the rest without
  const put = await t.callOn(0, 'POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: [{ id: 'r-010', url: `${img.url}/img/10.png`, metadata: { tags: ['red'] } }] },
  });
  expect(put.status).toBe(202);
  const byTag = (host: number) =>
    t.callOn(host, 'GET', `${ds.base}/search?q=tags:red`, { token: ds.dsToken });
  const similarByTag = (host: number) =>
    t.callOn(host, 'GET', `${ds.base}/similar?id=r-001&limit=3&q=tags:red`, {
      token: ds.dsToken,
    });
  const fields = (host: number, f: Record<string, string[]>) =>
    t.callOn(host, 'PUT', `${ds.base}/settings/fields`, {
      token: ds.orgToken,
      body: { fields: f },
    });
  // Every host has read the dataset (and would answer from that copy if it trusted it). Host 0
  // wrote the item and knows `tags` is an array field at once; host 1 may still resolve q
  // against the fields it read before the write, for at most 2 s (contract §12).
  expect((await byTag(0)).status).toBe(400);
  await waitFor(
    'host 1 to see the new array field',
    async () => (await byTag(1)).status === 400,
    5000,
  );
  // A request that started on host 0's old copy and began again on the new one is charged
  // once: its first attempt's charge is refunded (the usage ledger is read realtime).
  const requests = async () => {
    await t.chargesRecorded();
    const u = (await t.call('GET', '/orgs/acme/usage', { token: ds.orgToken })).body.usage;
    const rows: Array<{ type: string; requests: number }> = u.datasets.shoes?.usage ?? [];
    return (type: string) => rows.find((r) => r.type === type)?.requests ?? 0;
  };
  const before = await requests();
  // enabled on host 1, used on host 0 at once
  expect((await fields(1, { tags: ['*'] })).status).toBe(200);
  const found = await byTag(0);
  expect(found.status).toBe(200);
  expect(found.body.results.map((r: { id: string }) => r.id)).toEqual(['r-010']);
  expect((await similarByTag(0)).status).toBe(200);
  const after = await requests();
  expect([after('search') - before('search'), after('similar') - before('similar')]).toEqual([
    1, 1,
  ]);
  // disabled on host 1: host 0 refuses at once, though its last copy allowed it
  expect((await fields(1, {})).status).toBe(200);
  for (const r of [await byTag(0), await similarByTag(0)]) {
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain('/settings/fields');
  }
}, 60_000);
