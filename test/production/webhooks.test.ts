/**
 * Contract §17 with real processes, as scale-out.test.ts runs them: two API hosts and the
 * workers (dist/main.js) as separate processes, each with a DATA_DIR it cannot use, on one
 * Elasticsearch and one RabbitMQ. Delivery is at least once from the outbox in Elasticsearch,
 * so a worker killed mid-delivery or while holding the batching lease loses nothing.
 * The cases run in order: the later ones stop and start workers.
 */
import type { ChildProcess } from 'node:child_process';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { waitFor } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { ProcessInstallation } from '../helpers/process-installation';
import { buildDist, stopProcess, type HttpClient } from '../helpers/processes';
import {
  startWebhookReceiver,
  type Received,
  type WebhookReceiver,
} from '../helpers/webhook-receiver';

// 5 s → 50 ms, 5 min → 3 s, 30 min → 18 s: three failed answers cost about 21 s
const inst = new ProcessInstallation('w', { WEBHOOK_RETRY_SCALE: '100' });

let img: ImageServer;
const workers = new Map<string, ChildProcess>();
const receivers: WebhookReceiver[] = [];
const clients: Client[] = [];
let a: HttpClient;
let b: HttpClient;
let operator: string;

function startWorker(name: string): void {
  workers.set(name, inst.spawn(name, { APP_ROLES: 'worker', WORKER_CONCURRENCY: '4' }));
}

async function stopWorker(name: string, signal: NodeJS.Signals): Promise<void> {
  await stopProcess(workers.get(name)!, signal);
  workers.delete(name);
}

beforeAll(async () => {
  buildDist();
  img = await startImageServer();
  const apis = await inst.twoApis();
  ({ a, b } = apis);
  startWorker('worker-1');
  startWorker('worker-2');
  expect(apis.printed).toHaveLength(1);
  operator = apis.printed[0]!;
}, 180_000);

afterAll(async () => {
  for (const c of clients) await c.dispose();
  await inst.stop();
  await img?.close();
  for (const r of receivers) await r.close();
});

/**
 * An organisation with dataset `d` and a webhook made on API A for `events`, pointing at a new
 * verifying receiver; waits for the workers' webhook directories (read once a second).
 */
async function hooked(org: string, events: string[]) {
  const created = await a.call('POST', '/orgs', operator, { name: org });
  expect(created.status).toBe(201);
  const token = created.body.token as string;
  expect((await a.call('POST', `/orgs/${org}/datasets`, token, { name: 'd' })).status).toBe(201);
  const rx = await startWebhookReceiver();
  receivers.push(rx);
  const made = await a.call('POST', `/orgs/${org}/webhooks`, token, { url: rx.url, events });
  expect(made.status).toBe(201);
  rx.secret = made.body.secret as string;
  await new Promise((r) => setTimeout(r, 1500));
  return { token, rx, hook: made.body.webhook.id as string };
}

/** Pushes `n` items (ids `p0` …) through API B, 100 a request; returns the ids. */
async function push(org: string, token: string, n: number, from = 0): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `p${from + i}`);
  for (let i = 0; i < n; i += 100) {
    const content = ids
      .slice(i, i + 100)
      .map((id, k) => ({ id, url: `${img.url}/img/${from + i + k}.png` }));
    const r = await b.call('POST', `/orgs/${org}/datasets/d/content`, token, { content });
    expect(r.status).toBe(202);
  }
  return ids;
}

/** The ids of the `items.processed` requests in `rs`. */
const idsIn = (rs: Received[]): string[] =>
  rs.filter((r) => r.body?.type === 'items.processed').flatMap((r) => r.body.data.ids as string[]);

/** Waits until every id is in an answered `items.processed` request; returns the duplicates. */
async function allArrive(rx: WebhookReceiver, ids: string[], timeoutMs: number): Promise<number> {
  let missing = ids.length;
  await waitFor(
    'every id in items.processed',
    async () => {
      const got = new Set(idsIn(rx.delivered()));
      missing = ids.filter((id) => !got.has(id)).length;
      return missing === 0;
    },
    timeoutMs,
  ).catch((e: Error) => {
    throw new Error(`${e.message}: ${missing} of ${ids.length} missing`);
  });
  return idsIn(rx.delivered()).length - ids.length;
}

test('1,000 items through API B reach a webhook made on API A, signed, published once', async () => {
  const { token, rx } = await hooked('bulk', ['items.processed', 'dataset.published']);
  const ids = await push('bulk', token, 1000);
  const duplicates = await allArrive(rx, ids, 120_000);
  const published = await waitFor('dataset.published', async () =>
    rx.delivered().filter((r) => r.body.type === 'dataset.published'),
  );
  expect(published).toHaveLength(1);
  expect(published[0]!.body.data).toMatchObject({ organisation: 'bulk', dataset: 'd' });
  expect(rx.received.length).toBeGreaterThan(0);
  expect(rx.received.every((r) => r.verified)).toBe(true);
  // at most 1,000 ids a delivery (§17)
  for (const r of rx.received) expect((r.body.data.ids ?? []).length).toBeLessThanOrEqual(1000);
  // one publication, however long the other deliveries go on
  const after = await b.call('GET', '/orgs/bulk/datasets/d', token);
  expect(after.body.dataset.counts).toMatchObject({ processed: 1000, errors: 0 });
  expect(rx.delivered().filter((r) => r.body.type === 'dataset.published')).toHaveLength(1);
  // at least once: say whether duplicates came as re-sent requests or as other deliveries
  const once = new Map(rx.delivered().map((r) => [r.id, r]));
  const inOthers = idsIn([...once.values()]).length - ids.length;
  console.log(
    `1,000 items: ${rx.received.length} requests, ${once.size} webhook-ids; ${duplicates} ` +
      `duplicate ids, ${inOthers} of them in deliveries of other webhook-ids`,
  );
}, 180_000);

test('a receiver that answers 500 three times still gets every event, with a stable id', async () => {
  const { token, rx, hook } = await hooked('flaky', ['items.processed']);
  rx.script = [{ status: 500 }, { status: 500 }, { status: 500 }];
  const ids = await push('flaky', token, 50);
  const duplicates = await allArrive(rx, ids, 55_000);
  const failed = rx.received.filter((r) => r.status === 500);
  expect(failed).toHaveLength(3);
  // every refused delivery was sent again under its webhook-id, and then answered
  const answered = new Set(rx.delivered().map((r) => r.id));
  for (const f of failed) expect(answered.has(f.id)).toBe(true);
  expect(rx.received.every((r) => r.verified)).toBe(true);
  // each delivery's attempts are the requests sent under its webhook-id
  const log = await a.call('GET', `/orgs/flaky/webhooks/${hook}/deliveries`, token);
  for (const d of log.body.deliveries as Array<{ id: string; state: string; attempts: number }>) {
    expect(d.state).toBe('delivered');
    expect(d.attempts).toBe(rx.received.filter((r) => r.id === d.id).length);
  }
  console.log(`500 ×3: ${rx.received.length} requests, ${duplicates} duplicate ids`);
}, 90_000);

const EVENTS = `subscription P($o: String!, $d: String!) {
  datasetEvents(organisation: $o, dataset: $d) {
    type itemIds status counts { items processed pending errors }
  }
}`;
interface DatasetEvent {
  type: string;
  itemIds: string[];
  status: string;
  counts: { items: number; processed: number; pending: number; errors: number };
}

test('a subscription on API A gets the events of the one worker left, with the final counts', async () => {
  await stopWorker('worker-1', 'SIGTERM');
  const created = await a.call('POST', '/orgs', operator, { name: 'live' });
  const token = created.body.token as string;
  expect((await b.call('POST', '/orgs/live/datasets', token, { name: 'd' })).status).toBe(201);
  const events: DatasetEvent[] = [];
  let failure: unknown;
  const connected = new Promise<void>((resolve) => {
    const client = createClient({
      url: `${a.base.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `token ${token}` },
      lazy: false,
      retryAttempts: 0,
      on: { connected: () => resolve() },
    });
    clients.push(client);
    client.subscribe<{ datasetEvents: DatasetEvent }>(
      { query: EVENTS, variables: { o: 'live', d: 'd' } },
      {
        next: (r) => {
          if (r.errors) failure = r.errors;
          if (r.data) events.push(r.data.datasetEvents);
        },
        error: (e) => void (failure = e),
        complete: () => undefined,
      },
    );
  });
  await connected;
  // the server registers the subscription a moment after the socket opens (later under load),
  // and events are of what happens from then on: items go one at a time until an event shows
  // it listening, then the rest, so the dataset is published while it is
  const ids: string[] = [];
  while (events.length === 0) {
    ids.push(...(await push('live', token, 1, ids.length)));
    await waitFor('an event', async () => events.length > 0, 5_000).catch(() => undefined);
  }
  expect(ids.length).toBeLessThan(200);
  ids.push(...(await push('live', token, 200 - ids.length, ids.length)));
  const dataset = await waitFor(
    'the dataset processed and published',
    async () => {
      const ds = (await a.call('GET', '/orgs/live/datasets/d', token)).body.dataset;
      return ds.counts.processed === 200 && ds.status === 'published' && ds;
    },
    90_000,
  );
  await waitFor('every id and the final counts over the socket', async () => {
    const seen = new Set(events.flatMap((e) => e.itemIds));
    return ids.every((id) => seen.has(id)) && events.at(-1)?.counts.processed === 200;
  });
  expect(failure).toBeUndefined();
  expect(events.at(-1)!.counts).toEqual(dataset.counts);
  expect(events.at(-1)!.status).toBe('PUBLISHED');
  expect(events.filter((e) => e.type === 'DATASET_PUBLISHED')).toHaveLength(1);
}, 120_000);

test('a worker SIGKILLed while sending: another re-sends under the same webhook-id', async () => {
  await stopWorker('worker-2', 'SIGTERM');
  startWorker('worker-3');
  const { token, rx } = await hooked('killed', ['items.processed']);
  // the first request is held past the sender's life (and past its 10-s timeout)
  rx.script = [{ status: 200, delayMs: 40_000 }];
  const ids = await push('killed', token, 40);
  const held = await waitFor('the first delivery to arrive', async () => rx.received[0], 60_000);
  await stopWorker('worker-3', 'SIGKILL');
  const killedAt = Date.now();
  startWorker('worker-4');
  // the claim lapses 30 s after it was taken; then worker 4 sends it again
  const again = await waitFor(
    'the held delivery sent again',
    async () => rx.received.find((r) => r !== held && r.id === held.id),
    75_000,
  );
  expect(again.raw).toBe(held.raw);
  expect(again.verified).toBe(true);
  const answered = () => idsIn(rx.received.filter((r) => r !== held));
  await waitFor(
    'every id answered',
    async () => {
      const got = new Set(answered());
      return ids.every((id) => got.has(id));
    },
    60_000,
  );
  expect(rx.received.every((r) => r.verified)).toBe(true);
  const duplicates = answered().length - ids.length;
  console.log(
    `killed sender: re-sent ${Math.round((again.at - killedAt) / 1000)} s after the kill, ` +
      `${duplicates} duplicate ids`,
  );
}, 180_000);

test('the lease holder SIGKILLed while facts wait: the other worker batches within ~10 s', async () => {
  // worker 4 has been the only worker for longer than a lease: it holds the batching lease
  const { token, rx } = await hooked('lease', ['items.processed']);
  startWorker('worker-5');
  const ids = await push('lease', token, 300);
  // killed while its recorded facts wait to be batched
  await waitFor(
    'some items processed',
    async () =>
      (await a.call('GET', '/orgs/lease/datasets/d', token)).body.dataset.counts.processed >= 30,
    60_000,
  );
  await stopWorker('worker-4', 'SIGKILL');
  const killedAt = Date.now();
  const before = new Set(rx.received.map((r) => r.id));
  const firstNew = await waitFor(
    'a delivery made after the kill',
    async () => rx.received.find((r) => !before.has(r.id)),
    60_000,
  );
  const duplicates = await allArrive(rx, ids, 90_000);
  expect(rx.received.every((r) => r.verified)).toBe(true);
  const takeoverS = (firstNew.at - killedAt) / 1000;
  const lastS = (Math.max(...rx.received.map((r) => r.at)) - killedAt) / 1000;
  console.log(
    `killed lease holder: first new delivery ${takeoverS} s after the kill, last ${lastS} s; ` +
      `${duplicates} duplicate ids`,
  );
  // the lease lasts 10 s; the batch then settles before it is sent (§17: within 5 s)
  expect(takeoverS).toBeLessThan(20);
}, 180_000);

test('no process used DATA_DIR, and none died unasked', () => {
  expect(inst.dataDirUntouched()).toBe(true);
  for (const c of workers.values()) expect(c.exitCode).toBeNull();
  for (const n of ['api-a', 'api-b', 'worker-1', 'worker-2', 'worker-5'])
    expect(inst.logOf(n)).not.toMatch(/ENOTDIR|EEXIST|fatal/);
});
