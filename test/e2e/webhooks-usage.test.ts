/**
 * usage.threshold (contract §17), adversarially, on whichever engine the project runs: a fixed
 * package of 10 credits gives one 80 % event at 8 and one 100 % at 10, then 402s add none; a
 * raised limit is a new package with its own thresholds. The data names no dataset.
 */
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { OPERATOR, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import {
  startWebhookReceiver,
  type WebhookReceiver,
  webhookTestEnv,
} from '../helpers/webhook-receiver';

jest.setTimeout(120_000);

let t: TestApp;
let img: ImageServer;
let rx: WebhookReceiver;
let burstRx: WebhookReceiver;

beforeAll(async () => {
  img = await startImageServer();
  rx = await startWebhookReceiver();
  burstRx = await startWebhookReceiver();
  t = await startTestApp({ ...webhookTestEnv(img.url, [rx, burstRx]), WORKER_CONCURRENCY: '8' });
});
afterAll(async () => {
  await t?.stop();
  await img?.close();
  await rx?.close();
  await burstRx?.close();
});

/** Distinct usage.threshold events a receiver got (a retried delivery counts once). */
const thresholds = (r: WebhookReceiver) =>
  [...new Map(r.delivered().map((x) => [x.id, x])).values()]
    .filter((x) => x.body.type === 'usage.threshold')
    .map((x) => x.body.data as { kind: string; percent: number; used: number; limit: number });

const has = (r: WebhookReceiver, kind: string, percent: number, limit: number) =>
  thresholds(r).filter((d) => d.kind === kind && d.percent === percent && d.limit === limit);

/** An organisation on `plan` with a usage.threshold webhook to `r` and a published dataset. */
async function publishedOrg(name: string, plan: object, r: WebhookReceiver, first = 300) {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name, plan } });
  expect(o.status).toBe(201);
  const token = o.body.token as string;
  const d = await t.call('POST', `/orgs/${name}/datasets`, { token, body: { name: 'cat' } });
  expect(d.status).toBe(201);
  const base = `/orgs/${name}/datasets/cat`;
  const made = await t.call('POST', `/orgs/${name}/webhooks`, {
    token,
    body: { url: r.url, events: ['usage.threshold'] },
  });
  expect(made.status).toBe(201);
  r.secret = made.body.secret;
  await pause(1100); // the directory workers route by is read once a second
  const content = Array.from({ length: 200 }, (_, i) => ({
    id: `i${i}`,
    url: `${img.url}/img/${i + first}.png`,
  }));
  expect((await t.call('POST', `${base}/content`, { token, body: { content } })).status).toBe(202);
  await waitProcessed(t, base, token, 200);
  const dsToken = d.body.dataset.browse_token as string;
  return {
    token,
    hookId: made.body.webhook.id as string,
    search: async () => (await t.call('GET', `${base}/search?limit=2`, { token: dsToken })).status,
    searchOn: async (host: number) =>
      (await t.callOn(host, 'GET', `${base}/search?limit=2`, { token: dsToken })).status,
  };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A process checks an organisation's usage at most every 2 s (usage-thresholds.ts); waiting
 * that long before the crossing request makes it the first nudge of an interval.
 */
const checkable = () => pause(2100);

type Org = Awaited<ReturnType<typeof publishedOrg>>;
let thresh: Org;
let burst: Org;
beforeAll(async () => {
  // the burst test runs first, inside the first minute (see there)
  burst = await publishedOrg('burst', { credits: { limitType: 'fixed', limit: 10 } }, burstRx, 600);
}, 90_000);

// A process checks an organisation at most every 2 s, and once more at the end of an interval
// that had nudges: a crossing made by the last requests of a burst is announced within
// seconds, not at the lease holder's sweep a minute later.
test('a crossing at the end of a burst is announced within seconds', async () => {
  const o = burst;
  for (let i = 0; i < 8; i++) expect(await o.search()).toBe(200);
  const got = await waitFor(
    'the burst crossing',
    async () => has(burstRx, 'credits', 80, 10)[0],
    // the lease holder's sweep runs at start and every 60 s: this test runs first, well
    // inside the first minute, so only a nudge can make this event in time
    5_000,
  );
  expect(got).toEqual({ organisation: 'burst', kind: 'credits', percent: 80, used: 8, limit: 10 });
});

test('credits 80 % and 100 % once each; the data names no dataset', async () => {
  thresh = await publishedOrg('thresh', { credits: { limitType: 'fixed', limit: 10 } }, rx);
  const o = thresh;
  for (let i = 0; i < 7; i++) expect(await o.search()).toBe(200);
  await checkable();
  expect(has(rx, 'credits', 80, 10)).toEqual([]);
  expect(await o.search()).toBe(200);
  const eighty = await waitFor('credits 80 %', async () => has(rx, 'credits', 80, 10)[0], 10_000);
  expect(eighty).toEqual({
    organisation: 'thresh',
    kind: 'credits',
    percent: 80,
    used: 8,
    limit: 10,
  });
  const delivered = rx.delivered().find((x) => x.body.type === 'usage.threshold')!;
  expect(Object.keys(delivered.body).sort()).toEqual(['data', 'timestamp', 'type']);
  expect(delivered.body.data).not.toHaveProperty('dataset');
  expect(has(rx, 'credits', 100, 10)).toEqual([]);

  expect(await o.search()).toBe(200);
  await checkable();
  expect(await o.search()).toBe(200);
  const hundred = await waitFor(
    'credits 100 %',
    async () => has(rx, 'credits', 100, 10)[0],
    10_000,
  );
  expect(hundred).toEqual({
    organisation: 'thresh',
    kind: 'credits',
    percent: 100,
    used: 10,
    limit: 10,
  });
  for (let i = 0; i < 4; i++) expect(await o.search()).toBe(402);
});

// After the plan is raised from 10 to 20 credits, a search refused on a process that still
// holds the old plan must not make a 100 % event for the new package: a refusal counts as 100 %
// only under the limit it was judged on.
test('a raised limit: only its own 80 %, never a 100 % it has not reached', async () => {
  const o = thresh;
  // a raised limit is a new package: 80 % of 20 is 16, and its event is the only new one
  const raised = await t.call('PUT', '/orgs/thresh/plan', {
    token: OPERATOR,
    body: { plan: { credits: { limitType: 'fixed', limit: 20 } } },
  });
  expect(raised.status).toBe(200);
  // a plan reaches every process within PLAN_TTL_MS: until then 402s, which never count
  let used = 10;
  const apiHosts = t.hosts.filter((h) => h.url).length;
  for (let h = 0; h < apiHosts; h++)
    await waitFor(`the raised limit in force on API host ${h}`, async () => {
      const ok = (await o.searchOn(h)) === 200;
      if (ok) used++;
      return ok;
    });
  while (used < 15) {
    expect(await o.search()).toBe(200);
    used++;
  }
  await checkable();
  expect(await o.search()).toBe(200);
  const next = await waitFor(
    'credits 80 % of 20',
    async () => has(rx, 'credits', 80, 20)[0],
    10_000,
  );
  expect(next).toMatchObject({ percent: 80, used: 16, limit: 20 });
  // no event claims more than was used (a refusal may round up at most one 2-credit request)
  for (const d of thresholds(rx))
    expect(d.used).toBeGreaterThanOrEqual((d.limit * d.percent) / 100 - 2);
  expect(has(rx, 'credits', 80, 10)).toHaveLength(1);
  expect(has(rx, 'credits', 100, 10)).toHaveLength(1);
  expect(thresholds(rx)).toHaveLength(3);
  expect(thresholds(rx).every((d) => d.kind === 'credits')).toBe(true);
  const log = await t.call('GET', `/orgs/thresh/webhooks/${o.hookId}/deliveries`, {
    token: o.token,
  });
  expect(log.body.deliveries.map((x: { type: string }) => x.type)).toEqual(
    Array(3).fill('usage.threshold'),
  );
  expect(rx.received.every((x) => x.verified)).toBe(true);
});
