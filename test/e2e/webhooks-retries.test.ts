/**
 * A failing receiver (contract §17), adversarially, with WEBHOOK_RETRY_SCALE=1000 (5 s, 5 min,
 * 30 min… become 5 ms, 300 ms, 1.8 s…), on whichever engine the project runs: retries keep
 * their webhook-id and carry a fresh timestamp, gaps follow the schedule and Retry-After, a 410
 * disables at once, a receiver that is down leaves deliveries pending until a manual retry.
 * Timing is asserted as lower bounds only.
 */
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { setupDataset, startTestApp, waitFor, type TestApp } from '../helpers/app';
import { gql } from '../helpers/graphql';
import {
  startWebhookReceiver,
  type WebhookReceiver,
  webhookTestEnv,
} from '../helpers/webhook-receiver';
import { scrapeAll } from '../helpers/metrics';

jest.setTimeout(90_000);

let t: TestApp;
let img: ImageServer;
/** Not on the allow list: a redirect to it must never be followed. */
let trap: WebhookReceiver;
const NAMES = ['flaky', 'later', 'gone', 'alive', 'down', 'redir'] as const;
const rx = {} as Record<(typeof NAMES)[number], WebhookReceiver>;

beforeAll(async () => {
  img = await startImageServer();
  for (const k of NAMES) rx[k] = await startWebhookReceiver();
  trap = await startWebhookReceiver();
  t = await startTestApp(webhookTestEnv(img.url, Object.values(rx)));
});
afterAll(async () => {
  await t?.stop();
  await img?.close();
  for (const r of [...Object.values(rx), trap]) await r?.close().catch(() => undefined);
});

interface Delivery {
  id: string;
  type: string;
  state: string;
  attempts: number;
  last_status: number | null;
  last_error?: string;
  next_attempt_at: string | null;
}

/** An organisation with a dataset and a webhook for items.processed on each receiver given. */
async function orgWithHooks(org: string, ...receivers: WebhookReceiver[]) {
  const ds = await setupDataset(t, org, 'cat');
  const ids: string[] = [];
  for (const r of receivers) {
    const made = await t.call('POST', `/orgs/${org}/webhooks`, {
      token: ds.orgToken,
      body: { url: r.url, events: ['items.processed'] },
    });
    expect(made.status).toBe(201);
    r.secret = made.body.secret;
    ids.push(made.body.webhook.id);
  }
  // the directory workers route by is read once a second: a registration counts after it
  await new Promise((r) => setTimeout(r, 1100));
  let n = 0;
  return {
    ...ds,
    ids,
    /** Pushes one item; its id. */
    push: async () => {
      const id = `${org}${n++}`;
      const r = await t.call('POST', `${ds.base}/content`, {
        token: ds.orgToken,
        body: { content: [{ id, url: `${img.url}/img/${n + 100}.png` }] },
      });
      expect(r.status).toBe(202);
      return id;
    },
    deliveries: async (hook = ids[0]!) => {
      const r = await t.call('GET', `/orgs/${org}/webhooks/${hook}/deliveries`, {
        token: ds.orgToken,
      });
      expect(r.status).toBe(200);
      return r.body.deliveries as Delivery[];
    },
    webhook: async (hook = ids[0]!) =>
      (await t.call('GET', `/orgs/${org}/webhooks/${hook}`, { token: ds.orgToken })).body.webhook,
  };
}

const carries = (r: WebhookReceiver, item: string) =>
  r.delivered().find((x) => x.body.data?.ids?.includes(item));

test('500 three times, then 200: one webhook-id, fresh timestamps, gaps ≥ the schedule', async () => {
  rx.flaky.script = [{ status: 500 }, { status: 500 }, { status: 500 }];
  const o = await orgWithHooks('flaky', rx.flaky);
  const item = await o.push();
  await waitFor('delivered after three 500s', async () => carries(rx.flaky, item), 30_000);
  const tries = rx.flaky.received;
  expect(tries.map((r) => r.status)).toEqual([500, 500, 500, 200]);
  expect(new Set(tries.map((r) => r.id)).size).toBe(1);
  expect(tries.every((r) => r.verified)).toBe(true);
  // the same event each time
  expect(new Set(tries.map((r) => JSON.stringify(r.body))).size).toBe(1);
  // 5 ms, 300 ms, 1.8 s; waits of 5 min and more (unscaled) get up to -10 % jitter
  const gaps = tries.slice(1).map((r, i) => r.at - tries[i]!.at);
  expect(gaps[0]).toBeGreaterThanOrEqual(5);
  expect(gaps[1]).toBeGreaterThanOrEqual(270);
  expect(gaps[2]).toBeGreaterThanOrEqual(1620);
  // re-signed at each attempt: over ≥ 1.9 s the Unix-seconds timestamp moved on
  expect(tries[3]!.timestamp).toBeGreaterThan(tries[0]!.timestamp);
  expect(tries[3]!.signature).not.toBe(tries[0]!.signature);
  const log = await waitFor('the log says delivered', async () => {
    const l = await o.deliveries();
    return l[0]?.state === 'delivered' && l;
  });
  expect(log).toHaveLength(1);
  expect(log[0]).toMatchObject({
    id: tries[0]!.id,
    type: 'items.processed',
    state: 'delivered',
    attempts: 4,
    last_status: 200,
    next_attempt_at: null,
  });
  expect((await o.webhook()).state).toBe('active');
  const g = await gql<any, any>(
    t.url,
    `query W($id: String!) { organisation(name: "flaky") { webhook(id: $id) {
       state deliveries { id type state attempts lastStatus nextAttemptAt } } } }`,
    { id: o.ids[0] },
    o.orgToken,
  );
  expect(g.data?.organisation.webhook).toEqual({
    state: 'ACTIVE',
    deliveries: [
      {
        id: log[0]!.id,
        type: 'ITEMS_PROCESSED',
        state: 'DELIVERED',
        attempts: 4,
        lastStatus: 200,
        nextAttemptAt: null,
      },
    ],
  });

  // a manual retry of a delivered delivery: sent again under the same id, signed anew
  const before = rx.flaky.received.length;
  const again = await t.call(
    'POST',
    `/orgs/flaky/webhooks/${o.ids[0]}/deliveries/${log[0]!.id}/retry`,
    { token: o.orgToken },
  );
  expect([again.status, again.body.status]).toEqual([202, 'ok']);
  const resent = await waitFor('the manual retry arrives', async () =>
    rx.flaky.received.at(before),
  );
  expect(resent.id).toBe(tries[0]!.id);
  expect(resent.verified).toBe(true);
  expect(resent.timestamp).toBeGreaterThanOrEqual(tries[3]!.timestamp);
  expect(resent.raw).toBe(tries[3]!.raw);
  // and once more through GraphQL
  const count = rx.flaky.received.length;
  const viaGql = await gql<any, any>(
    t.url,
    `mutation R($w: String!, $d: String!) {
       retryWebhookDelivery(organisation: "flaky", webhook: $w, delivery: $d) }`,
    { w: o.ids[0], d: log[0]!.id },
    o.orgToken,
  );
  expect(viaGql.data).toEqual({ retryWebhookDelivery: true });
  const third = await waitFor('the GraphQL retry arrives', async () => rx.flaky.received.at(count));
  expect([third.id, third.verified]).toEqual([tries[0]!.id, true]);
});

test('a redirect is not followed (SSRF at delivery): not 2xx, so retried, and delivered', async () => {
  rx.redir.script = [{ status: 307, headers: { location: `${trap.url}?stolen=1` } }];
  const o = await orgWithHooks('redir', rx.redir);
  const item = await o.push();
  await waitFor('delivered on the second attempt', async () => carries(rx.redir, item), 30_000);
  expect(rx.redir.received.map((r) => r.status)).toEqual([307, 200]);
  // the redirect target (unlisted, on loopback) was never asked, during or after the 307
  expect(trap.received).toEqual([]);
  const log = await waitFor('logged delivered', async () => {
    const l = await o.deliveries();
    return l[0]?.state === 'delivered' && l;
  });
  expect(log[0]).toMatchObject({ attempts: 2, last_status: 200 });
});

test('503 with Retry-After: 2 and 429 with Retry-After: 1 are honoured', async () => {
  rx.later.script = [
    { status: 503, headers: { 'retry-after': '2' } },
    { status: 429, headers: { 'retry-after': '1' } },
  ];
  const o = await orgWithHooks('later', rx.later);
  const item = await o.push();
  // pending meanwhile, with the status it got and a next attempt ≥ 2 s on
  const pending = await waitFor('the first refusal logged', async () => {
    const l = await o.deliveries();
    return l[0]?.attempts === 1 && l[0];
  });
  expect(pending).toMatchObject({ state: 'pending', last_status: 503 });
  expect(Date.parse(pending.next_attempt_at!)).toBeGreaterThanOrEqual(
    rx.later.received[0]!.at + 1990,
  );
  await waitFor('delivered after 503 and 429', async () => carries(rx.later, item), 30_000);
  const tries = rx.later.received;
  expect(tries.map((r) => r.status)).toEqual([503, 429, 200]);
  expect(tries[1]!.at - tries[0]!.at).toBeGreaterThanOrEqual(2000);
  expect(tries[2]!.at - tries[1]!.at).toBeGreaterThanOrEqual(1000);
  expect(new Set(tries.map((r) => r.id)).size).toBe(1);
  expect(tries.every((r) => r.verified)).toBe(true);
});

test('410 disables the webhook at once and nothing more is sent to it', async () => {
  rx.gone.script = [{ status: 410 }];
  const o = await orgWithHooks('gone', rx.gone, rx.alive);
  const first = await o.push();
  await waitFor('the 410 recorded', async () => {
    const w = await o.webhook();
    return w.state === 'disabled' && w;
  });
  expect(await o.webhook()).toMatchObject({ state: 'disabled', disabled_reason: 'gone' });
  expect(rx.gone.received).toHaveLength(1);
  const log = await o.deliveries();
  expect(log[0]).toMatchObject({ attempts: 1, last_status: 410 });
  expect(log[0]!.state).not.toBe('delivered');
  // GraphQL shows the same
  const g = await gql<any, any>(
    t.url,
    `query W($id: String!) { organisation(name: "gone") { webhook(id: $id) { state disabledReason } } }`,
    { id: o.ids[0] },
    o.orgToken,
  );
  expect(g.data?.organisation.webhook).toEqual({ state: 'DISABLED', disabledReason: 'gone' });
  // a later event reaches the other webhook of the organisation, and not this one
  await waitFor('the first item reached the live webhook', async () => carries(rx.alive, first));
  const later = await o.push();
  await waitFor('the later item reached the live webhook', async () => carries(rx.alive, later));
  // and stays unsent to the disabled one after a whole retry schedule's first steps
  const logAfter = await o.deliveries();
  expect(logAfter.every((d) => d.attempts <= 1)).toBe(true);
  expect(rx.gone.received).toHaveLength(1);
  expect(rx.alive.received.every((r) => r.verified)).toBe(true);
});

test('a receiver that is down: pending, attempts > 1, last_status null; retry delivers now', async () => {
  const o = await orgWithHooks('down', rx.down);
  await rx.down.down();
  const item = await o.push();
  const stuck = await waitFor(
    'three failed attempts',
    async () => {
      const l = await o.deliveries();
      return l[0] && l[0].attempts >= 3 && l[0];
    },
    30_000,
  );
  expect(stuck).toMatchObject({ state: 'pending', last_status: null, type: 'items.processed' });
  expect(stuck.last_error).toBe('connection');
  expect(stuck.next_attempt_at).not.toBeNull();
  expect((await o.webhook()).state).toBe('active');
  // the 4th attempt is 7.2 s after the 3rd: a retry now arrives well before it
  const scheduled = Date.parse(stuck.next_attempt_at!);
  await rx.down.listen();
  const r = await t.call('POST', `/orgs/down/webhooks/${o.ids[0]}/deliveries/${stuck.id}/retry`, {
    token: o.orgToken,
  });
  expect([r.status, r.body.status]).toEqual([202, 'ok']);
  const got = await waitFor('the retried delivery arrives', async () => carries(rx.down, item));
  expect(got.id).toBe(stuck.id);
  expect(got.verified).toBe(true);
  if (scheduled - Date.now() > 1500) expect(got.at).toBeLessThan(scheduled);
  const done = await waitFor('logged delivered', async () => {
    const l = await o.deliveries();
    return l[0]?.state === 'delivered' && l[0];
  });
  expect(done.attempts).toBeGreaterThan(stuck.attempts);
  expect(done.last_status).toBe(200);
  // an unknown delivery, or one of another webhook: 404
  const unknown = await t.call(
    'POST',
    `/orgs/down/webhooks/${o.ids[0]}/deliveries/msg_unknown/retry`,
    { token: o.orgToken },
  );
  expect([unknown.status, unknown.body.error?.code]).toEqual([404, 'not_found']);
});

test('/metrics counts delivered and retried attempts', async () => {
  const metrics = await scrapeAll(t.hosts);
  const sum = (outcome: string) => metrics.sum('webhook_deliveries_total', `outcome="${outcome}"`);
  const all = Object.values(rx).flatMap((r) => r.received);
  expect(sum('delivered')).toBeGreaterThanOrEqual(all.filter((r) => r.status < 300).length);
  // 3 × 500, 503, 429, and the attempts on the closed port
  expect(sum('retried')).toBeGreaterThanOrEqual(5 + 2);
  // the 410 ended its delivery
  expect(sum('failed') + sum('retried')).toBeGreaterThanOrEqual(8);
});
