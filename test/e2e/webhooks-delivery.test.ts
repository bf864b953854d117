/**
 * What webhooks deliver (contract §17), adversarially, on whichever engine the project runs:
 * only the datasets a webhook follows, the body shapes exactly, every signature verifying,
 * at most 1,000 ids per delivery with more than 1,000 items pushed at once, each id in one
 * delivery, failures with code and message, and dataset.published exactly once per
 * publication (never for a dataset published before its webhook existed), plus the delivery
 * counter on /metrics.
 */
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import {
  startWebhookReceiver,
  type Received,
  type WebhookReceiver,
  webhookTestEnv,
} from '../helpers/webhook-receiver';
import { scrapeAll } from '../helpers/metrics';

jest.setTimeout(150_000);

let t: TestApp;
let img: ImageServer;
const rx: Record<'big' | 'other' | 'pre' | 'all' | 'spy', WebhookReceiver> = {} as never;

beforeAll(async () => {
  img = await startImageServer();
  for (const k of ['big', 'other', 'pre', 'all', 'spy'] as const)
    rx[k] = await startWebhookReceiver();
  t = await startTestApp({
    ...webhookTestEnv(img.url, Object.values(rx)),
    WORKER_CONCURRENCY: '8',
  });
});
afterAll(async () => {
  await t?.stop();
  await img?.close();
  for (const r of Object.values(rx)) await r?.close();
});

/** Registers a webhook for `r` and gives the receiver its secret. */
async function hook(org: string, token: string, r: WebhookReceiver, body: object) {
  const made = await t.call('POST', `/orgs/${org}/webhooks`, {
    token,
    body: { url: r.url, ...body },
  });
  expect(made.status).toBe(201);
  r.secret = made.body.secret;
  return made.body.webhook.id as string;
}

/** The directory workers route by is read once a second: a registration counts after it. */
const directoryRead = () => new Promise((r) => setTimeout(r, 1100));

const of = (r: WebhookReceiver, type: string): Received[] =>
  r.delivered().filter((x) => x.body.type === type);

/** Distinct deliveries (by webhook-id) of a type: a retried one counts once. */
const distinct = (r: WebhookReceiver, type: string): Received[] => [
  ...new Map(of(r, type).map((x) => [x.id, x])).values(),
];

const push = async (token: string, base: string, content: object[]) => {
  const r = await t.call('POST', `${base}/content`, { token, body: { content } });
  expect(r.status).toBe(202);
};

const deliveries = async (org: string, token: string, id: string) => {
  const r = await t.call('GET', `/orgs/${org}/webhooks/${id}/deliveries`, { token });
  expect(r.status).toBe(200);
  return r.body.deliveries as Array<{
    id: string;
    type: string;
    state: string;
    attempts: number;
    last_status: number | null;
    next_attempt_at: string | null;
  }>;
};

test('1,200 items: only the followed dataset, exact shapes, ≤1,000 ids each, one publication', async () => {
  const big = await setupDataset(t, 'deliv', 'big');
  const other = await t.call('POST', '/orgs/deliv/datasets', {
    token: big.orgToken,
    body: { name: 'other' },
  });
  expect(other.status).toBe(201);
  const otherBase = '/orgs/deliv/datasets/other';
  const ITEM_EVENTS = ['items.processed', 'items.failed', 'dataset.published'];
  const bigHook = await hook('deliv', big.orgToken, rx.big, {
    events: ITEM_EVENTS,
    datasets: ['big'],
  });
  await hook('deliv', big.orgToken, rx.other, { events: ITEM_EVENTS, datasets: ['other'] });
  await hook('deliv', big.orgToken, rx.all, { events: ['items.failed'] });
  const spy = await setupDataset(t, 'spy', 'big');
  await hook('spy', spy.orgToken, rx.spy, { events: ITEM_EVENTS });
  await directoryRead();

  const ids = Array.from({ length: 1200 }, (_, i) => `b${i}`);
  await push(big.orgToken, big.base, [
    ...ids.map((id, i) => ({ id, url: `${img.url}/img/${i}.png` })),
    { id: 'bigbad', url: `${img.url}/missing.png` },
  ]);
  await push(big.orgToken, otherBase, [
    { id: 'o1', url: `${img.url}/img/5001.png` },
    { id: 'o2', url: `${img.url}/img/5002.png` },
    { id: 'otherbad', url: `${img.url}/missing.png` },
  ]);

  // every id of big arrives, in deliveries of at most 1,000 ids, each id in one delivery only
  const got = await waitFor(
    'every id of big delivered',
    async () => {
      const seen = new Set(distinct(rx.big, 'items.processed').flatMap((r) => r.body.data.ids));
      return ids.every((id) => seen.has(id)) && seen;
    },
    120_000,
  );
  expect(got.size).toBe(1200);
  const batches = distinct(rx.big, 'items.processed');
  for (const b of batches) {
    expect(b.body.data.ids.length).toBeGreaterThan(0);
    expect(b.body.data.ids.length).toBeLessThanOrEqual(1000);
  }
  const idCount = batches.reduce((n, b) => n + b.body.data.ids.length, 0);
  expect(idCount).toBe(1200);

  // shapes, exactly (contract §17)
  for (const b of batches) {
    expect(Object.keys(b.body).sort()).toEqual(['data', 'timestamp', 'type']);
    expect(b.body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(b.body.data).toEqual({ organisation: 'deliv', dataset: 'big', ids: expect.any(Array) });
    expect(b.id).toMatch(/^msg_[A-Za-z0-9]+$/);
    expect(b.path).toBe('/hook');
    expect(b.contentType).toMatch(/^application\/json/);
    expect(Math.abs(b.timestamp * 1000 - b.at)).toBeLessThan(60_000);
  }
  const failed = await waitFor('the failure of big', async () => of(rx.big, 'items.failed')[0]);
  expect(failed.body).toEqual({
    type: 'items.failed',
    timestamp: expect.any(String),
    data: {
      organisation: 'deliv',
      dataset: 'big',
      errors: [{ id: 'bigbad', code: expect.any(String), message: expect.any(String) }],
    },
  });
  expect(failed.body.data.errors[0].code.length).toBeGreaterThan(0);
  expect(failed.body.data.errors[0].message.length).toBeGreaterThan(0);
  const published = await waitFor('big published', async () =>
    of(rx.big, 'dataset.published').at(0),
  );
  expect(published.body).toEqual({
    type: 'dataset.published',
    timestamp: expect.any(String),
    data: {
      organisation: 'deliv',
      dataset: 'big',
      counts: {
        items: expect.any(Number),
        processed: expect.any(Number),
        pending: expect.any(Number),
        errors: expect.any(Number),
      },
    },
  });
  expect(published.body.data.counts.processed).toBeGreaterThanOrEqual(200);

  // the other webhook hears only of `other`; the unfiltered one of both failures
  const otherIds = await waitFor('o1 and o2 delivered', async () => {
    const s = new Set(distinct(rx.other, 'items.processed').flatMap((r) => r.body.data.ids));
    return s.has('o1') && s.has('o2') && s;
  });
  expect([...otherIds].sort()).toEqual(['o1', 'o2']);
  await waitFor('otherbad delivered to other', async () => of(rx.other, 'items.failed').length);
  const allFailures = await waitFor('both failures reach the unfiltered webhook', async () => {
    const e = of(rx.all, 'items.failed').flatMap((r) => r.body.data.errors);
    return e.length >= 2 && e;
  });
  expect(
    allFailures.map((e: { id: string }) => e.id).sort((x: string, y: string) => x.localeCompare(y)),
  ).toEqual(['bigbad', 'otherbad']);
  for (const r of of(rx.all, 'items.failed'))
    expect(r.body.data.dataset).toBe(r.body.data.errors[0].id === 'bigbad' ? 'big' : 'other');
  for (const r of [...rx.other.received, ...rx.all.received])
    expect(JSON.stringify(r.body)).not.toMatch(/"b\d+"/);
  // `other` has 2 items: never published
  expect(of(rx.other, 'dataset.published')).toEqual([]);

  // more items after publication: still one dataset.published
  await push(big.orgToken, big.base, [
    { id: 'late1', url: `${img.url}/img/6001.png` },
    { id: 'late2', url: `${img.url}/img/6002.png` },
  ]);
  await waitFor('late items delivered', async () => {
    const s = new Set(distinct(rx.big, 'items.processed').flatMap((r) => r.body.data.ids));
    return s.has('late1') && s.has('late2');
  });
  await waitProcessed(t, big.base, big.orgToken, 1203);
  const log = await deliveries('deliv', big.orgToken, bigHook);
  expect(log.filter((d) => d.type === 'dataset.published')).toHaveLength(1);
  expect(distinct(rx.big, 'dataset.published')).toHaveLength(1);
  // the log is newest first, and every delivery made it
  const created = log.map((d) => Date.parse((d as unknown as { created_at: string }).created_at));
  expect([...created].sort((x, y) => y - x)).toEqual(created);
  expect(log.every((d) => d.state === 'delivered' && d.last_status === 200)).toBe(true);
  expect(log.every((d) => d.next_attempt_at === null)).toBe(true);
  // each delivery's id is the webhook-id it arrived with
  const arrived = new Set(rx.big.delivered().map((r) => r.id));
  for (const d of log) expect(arrived.has(d.id)).toBe(true);

  for (const r of Object.values(rx)) expect(r.received.every((x) => x.verified)).toBe(true);
  // another organisation's webhook, following every dataset of its own, heard nothing of these
  expect(rx.spy.received).toEqual([]);
});

/** prepub/cat: published before its webhook existed (the next test goes on from there). */
let pre: { orgToken: string; base: string; hookId: string };

test('no dataset.published for a dataset published before its webhook existed', async () => {
  const ds = await setupDataset(t, 'prepub', 'cat');
  const content = Array.from({ length: 200 }, (_, i) => ({
    id: `p${i}`,
    url: `${img.url}/img/${i + 2000}.png`,
  }));
  await push(ds.orgToken, ds.base, content);
  await waitProcessed(t, ds.base, ds.orgToken, 200);
  expect((await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset.status).toBe(
    'published',
  );
  const id = await hook('prepub', ds.orgToken, rx.pre, {
    events: ['items.processed', 'dataset.published'],
  });
  await directoryRead();
  await push(ds.orgToken, ds.base, [{ id: 'after1', url: `${img.url}/img/7001.png` }]);
  await waitFor('after1 delivered', async () =>
    of(rx.pre, 'items.processed').some((r) => r.body.data.ids.includes('after1')),
  );
  // the publication would have been made in the same pass as after1's delivery, or before it
  expect((await deliveries('prepub', ds.orgToken, id)).map((d) => d.type)).toEqual([
    'items.processed',
  ]);
  expect(of(rx.pre, 'dataset.published')).toEqual([]);
  pre = { orgToken: ds.orgToken, base: ds.base, hookId: id };
});

// A dataset that falls below 200 processed items is `pending` again (contract §3) and is
// published again at 200, which §17 announces; deletes make no item facts, so the batcher must
// see the crossing in the counts of the pass that made it.
test('dataset.published again when a dataset falls below 200 and re-publishes', async () => {
  const ds = pre;
  const id = pre.hookId;
  // below 200 processed it is pending again (contract §3); back to 200, published again
  const del = await t.call('DELETE', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { ids: ['p0', 'p1'] },
  });
  expect(del.status).toBeLessThan(300);
  await waitFor('pending again', async () => {
    const d = (await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset;
    return d.status === 'pending' && d.counts.processed === 199;
  });
  await push(ds.orgToken, ds.base, [{ id: 'again1', url: `${img.url}/img/7002.png` }]);
  await waitFor('again1 delivered', async () =>
    of(rx.pre, 'items.processed').some((r) => r.body.data.ids.includes('again1')),
  );
  expect((await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset.status).toBe(
    'published',
  );
  const published = await waitFor(
    'dataset.published after re-publication',
    async () => {
      const log = await deliveries('prepub', ds.orgToken, id);
      return log.filter((d) => d.type === 'dataset.published').length > 0 && log;
    },
    10_000,
  );
  expect(published.filter((d) => d.type === 'dataset.published')).toHaveLength(1);
});

test('/metrics counts delivered webhook deliveries', async () => {
  const metrics = await scrapeAll(t.hosts);
  const sum = (outcome: string) => metrics.sum('webhook_deliveries_total', `outcome="${outcome}"`);
  const arrived = Object.values(rx).reduce((n, r) => n + r.delivered().length, 0);
  expect(sum('delivered')).toBeGreaterThanOrEqual(arrived);
  expect(sum('delivered')).toBeGreaterThan(0);
  expect(metrics.text).toMatch(/^# TYPE webhook_deliveries_total counter$/m);
  expect(metrics.text).toMatch(/^webhook_delivery_duration_seconds_count /m);
});
