/**
 * GraphQL subscriptions over graphql-transport-ws (contract §17): live progress of a dataset,
 * from the workers of every host (with Elasticsearch the installation's API hosts and workers
 * are separate, so notices cross RabbitMQ), and the same rules as POST /graphql.
 */
import { createClient, type Client, type ExecutionResult } from 'graphql-ws';
import net from 'node:net';
import WebSocket from 'ws';
import {
  OPERATOR,
  setupDataset,
  startTestApp,
  waitFor,
  waitProcessed,
  type TestApp,
} from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

const PROTOCOL = 'graphql-transport-ws';
const EVENTS = `subscription Progress($o: String!, $d: String!) {
  datasetEvents(organisation: $o, dataset: $d) {
    type itemIds status counts { items processed pending errors }
  }
}`;

interface DatasetEvent {
  type: 'ITEMS_PROCESSED' | 'ITEMS_FAILED' | 'DATASET_PUBLISHED';
  itemIds: string[];
  status: 'PENDING' | 'PUBLISHED';
  counts: { items: number; processed: number; pending: number; errors: number };
}
type Result = ExecutionResult<{ datasetEvents: DatasetEvent }>;

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
const clients: Client[] = [];

const wsUrl = (): string => `${t.url.replace(/^http/, 'ws')}/graphql`;

/** A client that connects at once, stays connected and never retries; `closed` has the code. */
function connect(token: string | undefined): {
  client: Client;
  closed: { code?: number; connected?: boolean };
} {
  const closed: { code?: number; connected?: boolean } = {};
  const client = createClient({
    url: wsUrl(),
    webSocketImpl: WebSocket,
    connectionParams: token ? { authorization: `token ${token}` } : {},
    lazy: false,
    retryAttempts: 0,
    // the closes these tests cause are expected; `closed` records them
    onNonLazyError: () => undefined,
    on: {
      connected: () => void (closed.connected = true),
      closed: (e) => void (closed.code = (e as { code: number }).code),
    },
  });
  clients.push(client);
  return { client, closed };
}

/** Everything a subscription yields (results, then its end or error). */
function subscribe(client: Client, query: string, variables: Record<string, unknown> = {}) {
  const got: { results: Result[]; error?: unknown; done: boolean } = { results: [], done: false };
  const stop = client.subscribe<Result['data']>(
    { query, variables },
    {
      next: (r) => void got.results.push(r as Result),
      error: (e) => {
        got.error = e;
        got.done = true;
      },
      complete: () => void (got.done = true),
    },
  );
  return { got, stop };
}

/** A raw socket's close code after it sent connection_init with `payload`. */
function closeCodeAfterInit(payload: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(), PROTOCOL);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload })));
    ws.on('close', (code) => resolve(code));
    ws.on('error', reject);
  });
}

/** The HTTP status an upgrade is refused with. */
function refusedWith(path: string, protocol?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}${path}`, protocol);
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => reject(new Error(`${path} upgraded`)));
    ws.on('error', () => undefined);
  });
}

const push = (ids: string[]) =>
  t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: ids.map((id, i) => ({ id, url: `${img.url}/img/${i + 1}.png` })) },
  });

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
}, 120_000);
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t.stop();
  await img.close();
});

test('streams processed ids with the counts after them, and the publication once', async () => {
  const { client } = connect(ds.orgToken);
  const { got } = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  const events = () => got.results.map((r) => r.data!.datasetEvents);
  const seen = (id: string) => events().some((e) => e.itemIds.includes(id));
  // The subscription is live once an item shows up in it; before that, items may pass unseen.
  let n = 0;
  await waitFor('a first event', async () => {
    if (n % 20 === 0) await push([`warm-${n}`]);
    n++;
    return events().length > 0;
  });
  expect(got.error).toBeUndefined();
  const ids = Array.from({ length: 200 }, (_, i) => `p-${String(i).padStart(3, '0')}`);
  expect((await push(ids)).status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, 200 + Math.ceil(n / 20));
  const dataset = (await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset;
  expect(dataset.status).toBe('published');
  await waitFor('every id and the final counts', async () => {
    const last = events().at(-1);
    return ids.every(seen) && last?.counts.processed === dataset.counts.processed;
  });
  const processed = events().filter((e) => e.type === 'ITEMS_PROCESSED');
  for (const id of ids) expect(processed.some((e) => e.itemIds.includes(id))).toBe(true);
  expect(events().at(-1)!.counts).toEqual(dataset.counts);
  expect(events().at(-1)!.status).toBe('PUBLISHED');
  const published = events().filter((e) => e.type === 'DATASET_PUBLISHED');
  expect(published).toHaveLength(1);
  expect(published[0]).toMatchObject({ itemIds: [], status: 'PUBLISHED' });
  expect(published[0]!.counts.processed).toBeGreaterThanOrEqual(200);
  // an event's counts already include its items: none says fewer processed than it carries
  for (const e of processed) expect(e.counts.processed).toBeGreaterThanOrEqual(e.itemIds.length);
  // the publication follows the first event whose counts made the dataset PUBLISHED
  const at = events().indexOf(published[0]!);
  expect(events().findIndex((e) => e.status === 'PUBLISHED')).toBe(at - 1);
  expect(
    events()
      .slice(at)
      .every((e) => e.status === 'PUBLISHED'),
  ).toBe(true);
}, 120_000);

test("takes GraphiQL's `Authorization` as well as `authorization`", async () => {
  const ack = await new Promise<string>((resolve, reject) => {
    const ws = new WebSocket(wsUrl(), PROTOCOL);
    ws.on('open', () =>
      ws.send(
        JSON.stringify({
          type: 'connection_init',
          payload: { Authorization: `token ${ds.orgToken}` },
        }),
      ),
    );
    ws.on('message', (m: Buffer) => {
      resolve((JSON.parse(m.toString()) as { type: string }).type);
      ws.close();
    });
    ws.on('error', reject);
  });
  expect(ack).toBe('connection_ack');
});

test('a bad token closes the socket with 4403', async () => {
  expect(await closeCodeAfterInit({ authorization: 'token org_nope_nope' })).toBe(4403);
  expect(await closeCodeAfterInit({})).toBe(4403);
  const { client, closed } = connect('org_nope_nope');
  const { got } = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('the close', async () => got.done);
  expect(closed.code).toBe(4403);
});

test('a dataset token gets forbidden on the subscription; the socket stays open', async () => {
  const { client, closed } = connect(ds.dsToken);
  const { got } = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('the answer', async () => got.done);
  expect(got.results[0]?.errors?.[0]?.extensions?.code).toBe('forbidden');
  // the same socket still answers: another subscription is refused the same way
  const again = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('the second answer', async () => again.got.done);
  expect(again.got.results[0]?.errors?.[0]?.extensions?.code).toBe('forbidden');
  expect(closed.code).toBeUndefined();
  // and an unknown dataset is not_found for an org token
  const org = connect(ds.orgToken);
  const missing = subscribe(org.client, EVENTS, { o: 'acme', d: 'nope' });
  await waitFor('not found', async () => missing.got.done);
  expect(missing.got.results[0]?.errors?.[0]?.extensions?.code).toBe('not_found');
});

test('a revoked org token loses its socket within the revocation window', async () => {
  const issued = await t.call('POST', '/orgs/acme/tokens', { token: ds.orgToken });
  expect(issued.status).toBe(201);
  const { client, closed } = connect(issued.body.token as string);
  const { got } = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  // connected: the same token streams (the push shows the subscription is live)
  await waitFor('a live subscription', async () => {
    await push([`rev-${Date.now()}`]);
    await new Promise((r) => setTimeout(r, 300));
    return got.results.length > 0;
  });
  const del = await t.call('DELETE', `/orgs/acme/tokens/${issued.body.prefix}`, {
    token: ds.orgToken,
  });
  expect(del.status).toBe(200);
  const revokedAt = Date.now();
  await waitFor('the close', async () => closed.code !== undefined, 10_000);
  expect(closed.code).toBe(4403);
  // contract §12's 2 s, plus the round trips of this test's own calls
  expect(Date.now() - revokedAt).toBeLessThan(2500);
}, 60_000);

test('documents meet the limits of POST /graphql; only subscriptions are served', async () => {
  const { client, closed } = connect(ds.orgToken);
  const aliases = Array.from({ length: 20 }, (_, i) => `t${i}: type`).join(' ');
  const tooMany = subscribe(
    client,
    `subscription { datasetEvents(organisation: "acme", dataset: "shoes") { ${aliases} } }`,
  );
  const long = subscribe(
    client,
    `subscription { datasetEvents(organisation: "acme", dataset: "shoes") { ${'type '.repeat(5000)} } }`,
  );
  const query = subscribe(client, '{ __typename }');
  const unknown = subscribe(client, 'subscription { nothingHere }');
  for (const s of [tooMany, long, query, unknown]) {
    await waitFor('an answer', async () => s.got.done);
    const errors = s.got.error as Array<{ message: string; extensions: { code: string } }>;
    expect(Array.isArray(errors)).toBe(true);
    expect(errors[0]!.extensions.code).toBe('invalid_request');
  }
  expect((query.got.error as Array<{ message: string }>)[0]!.message).toMatch(/POST \/graphql/);
  expect(closed.code).toBeUndefined();
});

test('a socket holds at most 10 subscriptions', async () => {
  const { client } = connect(ds.orgToken);
  const open = Array.from({ length: 10 }, () =>
    subscribe(client, EVENTS, { o: 'acme', d: 'shoes' }),
  );
  const extra = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('the refusal', async () => extra.got.done);
  const errors = extra.got.error as Array<{ message: string; extensions: { code: string } }>;
  expect(errors[0]!.message).toMatch(/at most 10/);
  expect(open.every((s) => !s.got.done)).toBe(true);
  // one ended makes room for another
  open[0]!.stop();
  const again = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('a live subscription', async () => {
    await push([`room-${Date.now()}`]);
    await new Promise((r) => setTimeout(r, 300));
    return again.got.results.length > 0;
  });
  expect(again.got.error).toBeUndefined();
}, 60_000);

test('failed connection_init counts toward the failed-authentication limit', async () => {
  const limited = await startTestApp({ APP_ROLES: 'api', RATE_LIMIT_PER_MINUTE: '3' });
  try {
    const url = `${limited.url.replace(/^http/, 'ws')}/graphql`;
    for (let i = 0; i < 3; i++) {
      const code = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(url, PROTOCOL);
        ws.on('open', () =>
          ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: 'nope' } })),
        );
        ws.on('close', (c) => resolve(c));
        ws.on('error', reject);
      });
      expect(code).toBe(4403);
    }
    // the address has used its failures: REST now answers a bad token with 429, not 401
    const r = await limited.call('GET', '/orgs/acme/datasets', { token: 'org_nope_nope' });
    expect(r.status).toBe(429);
  } finally {
    await limited.stop();
  }
}, 60_000);

test('a request asking to upgrade to h2c (curl --http2) is answered as HTTP/1.1 without a body', async () => {
  // what curl sends; Node's own client cannot take a 200 to an upgrade request
  const send = (method: string, path: string, body = '') =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const { hostname, port } = new URL(t.url);
      const socket = net.connect(Number(port), hostname, () =>
        socket.write(
          `${method} ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
            'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n' +
            'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAccept: application/json\r\n' +
            `Authorization: token ${ds.orgToken}\r\n` +
            (body
              ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
              : '') +
            `\r\n${body}`,
        ),
      );
      let raw = '';
      socket.on('data', (d: Buffer) => (raw += d.toString()));
      socket.on('end', () => {
        const [headers, ...rest] = raw.split('\r\n\r\n');
        resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(headers!)?.[1]), body: rest.join('') });
      });
      socket.on('error', reject);
    });
  const got = await send('GET', '/orgs/acme/datasets');
  expect(got.status).toBe(200);
  expect(JSON.parse(got.body).datasets).toBeDefined();
  // a body cannot follow an upgrade request through Node: refused in the error format
  const posted = await send('POST', '/graphql', JSON.stringify({ query: '{ __typename }' }));
  expect(posted.status).toBe(400);
  expect(JSON.parse(posted.body).error.code).toBe('invalid_request');
});

test('upgrades only /graphql with the graphql-transport-ws protocol', async () => {
  expect(await refusedWith('/orgs', PROTOCOL)).toBe(404);
  expect(await refusedWith('/graphql')).toBe(400);
  expect(await refusedWith('/graphql', 'graphql-ws')).toBe(400);
});

test('the operator is refused as GET dataset refuses it', async () => {
  const rest = await t.call('GET', ds.base, { token: OPERATOR });
  const { client } = connect(OPERATOR);
  const { got } = subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('the answer', async () => got.done);
  expect(got.results[0]?.errors?.[0]?.extensions?.code).toBe(rest.body.error.code);
});

test('a stopping server says 1001 to its subscribers', async () => {
  const { client, closed } = connect(ds.orgToken);
  subscribe(client, EVENTS, { o: 'acme', d: 'shoes' });
  await waitFor('connected', async () => closed.connected);
  await t.app.stop();
  await waitFor('the close', async () => closed.code !== undefined, 5000);
  expect(closed.code).toBe(1001);
});
