/**
 * Fault tests of the production set-up: an API process and separate worker processes
 * (dist/main.js with APP_ROLES=api / worker) on the real Elasticsearch and RabbitMQ.
 * A worker is SIGKILLed mid-batch, and the broker goes away mid-batch; every item that got a
 * 202 must end processed, none lost, and no image counted twice.
 *
 * The broker is taken away from this installation alone, through a TCP proxy that drops every
 * connection and refuses new ones, then accepts them again: the local broker is shared by the
 * suites running in parallel, and restarting it made their apps fail to start. A restart of a
 * broker itself, its queues and state included, is broker-restart.test.ts (on a node of its own).
 */
import type { ChildProcess } from 'node:child_process';
import { OPERATOR, deleteInstallation, tempDir, waitFor } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { startTcpProxy } from '../helpers/tcp-proxy';
import {
  buildDist,
  freePort,
  httpClient,
  spawnService,
  stopProcess,
  type HttpClient,
} from '../helpers/processes';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
let img: ImageServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  buildDist();
  img = await startImageServer();
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => stopProcess(c, 'SIGKILL')));
  await img.close();
});

/** One installation: shared data dir, its own indices and queues. */
function installation(extra: Record<string, string> = {}) {
  const dataDir = tempDir('vss-fault-');
  const tag = `f${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const env = {
    SEARCH_BACKEND: 'elasticsearch',
    ELASTICSEARCH_URL: ES_URL,
    ES_INDEX_PREFIX: `${tag}-`,
    QUEUE: 'rabbitmq',
    AMQP_QUEUE_PREFIX: `test.${tag}.`,
    ...extra,
  };
  let n = 0;
  const mine: ChildProcess[] = [];
  const spawned = (child: ChildProcess): ChildProcess => {
    children.push(child);
    mine.push(child);
    return child;
  };
  return {
    dataDir,
    async api(): Promise<HttpClient> {
      const port = await freePort();
      spawned(spawnService(dataDir, 'api', { ...env, APP_ROLES: 'api', PORT: String(port) }));
      const client = httpClient(port);
      await client.up();
      return client;
    },
    worker(concurrency = 2): ChildProcess {
      return spawned(
        spawnService(dataDir, `worker-${++n}`, {
          ...env,
          APP_ROLES: 'worker',
          WORKER_CONCURRENCY: String(concurrency),
        }),
      );
    },
    async cleanup(): Promise<void> {
      // Processes first: a worker still finishing a redelivered job would write its image
      // count after the delete, and Elasticsearch would create that index again, left behind.
      await Promise.all(mine.map((c) => stopProcess(c, 'SIGKILL')));
      await deleteInstallation(ES_URL, `${tag}-`);
    },
  };
}

async function dataset(api: HttpClient): Promise<string> {
  const org = await api.call('POST', '/orgs', OPERATOR, { name: 'acme' });
  const token = org.body.token as string;
  const ds = await api.call('POST', '/orgs/acme/datasets', token, { name: 'd' });
  expect(ds.status).toBe(201);
  return token;
}

async function post(api: HttpClient, token: string, ids: string[], ms: number): Promise<number> {
  const r = await api.call('POST', '/orgs/acme/datasets/d/content', token, {
    content: ids.map((id) => ({
      id,
      url: `${img.url}/delayed/${id.replace(/\D/g, '')}.png?ms=${ms}`,
    })),
  });
  return r.status;
}

const counts = async (api: HttpClient, token: string) =>
  (await api.call('GET', '/orgs/acme/datasets/d', token)).body.dataset.counts as {
    items: number;
    processed: number;
    pending: number;
    errors: number;
  };

async function expectAllProcessed(api: HttpClient, token: string, acked: string[]): Promise<void> {
  await waitFor(
    'every acknowledged item processed',
    async () => {
      const c = await counts(api, token);
      return c.pending === 0 && c.items >= acked.length;
    },
    120_000,
  );
  const c = await counts(api, token);
  expect(c).toEqual({ items: acked.length, processed: acked.length, pending: 0, errors: 0 });
  const listed = await api.call('GET', '/orgs/acme/datasets/d/content?limit=1000', token);
  const processed = new Set(
    (listed.body.content as Array<{ id: string; processed: boolean }>)
      .filter((e) => e.processed)
      .map((e) => e.id),
  );
  for (const id of acked) expect(processed.has(id)).toBe(true);
  // none charged twice: redelivered jobs of the killed worker (or of the broker restart) do not
  // count their image again
  const usage = await api.call('GET', '/orgs/acme/usage', token);
  expect(usage.body.usage.images.processed).toBe(acked.length);
}

test('a worker SIGKILLed mid-batch loses nothing; the other workers finish its jobs', async () => {
  const inst = installation();
  const api = await inst.api();
  const token = await dataset(api);
  const w1 = inst.worker(3);
  inst.worker(3);
  const ids = Array.from({ length: 150 }, (_, i) => `k${i + 1000}`);
  for (let b = 0; b < ids.length; b += 50)
    expect(await post(api, token, ids.slice(b, b + 50), 150)).toBe(202);

  await waitFor('some items processed', async () => (await counts(api, token)).processed >= 20);
  // Both workers were taking jobs: more images in flight than one worker's concurrency.
  expect(img.peakInFlight()).toBeGreaterThan(3);
  const before = await counts(api, token);
  expect(before.pending).toBeGreaterThan(0); // the kill really happens mid-batch
  await stopProcess(w1, 'SIGKILL');
  inst.worker(3); // a replacement joins the one that survived

  await expectAllProcessed(api, token, ids);
  await inst.cleanup();
}, 180_000);

test('the broker going away mid-batch loses nothing, including writes accepted while it was away', async () => {
  const broker = await startTcpProxy(5672);
  const inst = installation({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${broker.port}` });
  const api = await inst.api();
  const token = await dataset(api);
  const worker = inst.worker(2);
  const first = Array.from({ length: 80 }, (_, i) => `r${i + 2000}`);
  expect(await post(api, token, first.slice(0, 40), 150)).toBe(202);
  expect(await post(api, token, first.slice(40), 150)).toBe(202);
  await waitFor('some items processed', async () => (await counts(api, token)).processed >= 10);
  expect((await counts(api, token)).pending).toBeGreaterThan(0);

  await broker.cut();
  // While the broker is down the API still accepts writes: they are durable in the store and
  // the worker's sweep after reconnecting queues them.
  const during = Array.from({ length: 20 }, (_, i) => `r${i + 3000}`);
  expect(await post(api, token, during, 10)).toBe(202);
  await new Promise((r) => setTimeout(r, 3000)); // several reconnect attempts fail meanwhile
  await broker.restore();

  await expectAllProcessed(api, token, [...first, ...during]);
  expect(worker.exitCode).toBeNull(); // the worker reconnected rather than dying
  expect(await stopProcess(worker, 'SIGTERM')).toBe(0);
  await inst.cleanup();
  await broker.close();
}, 240_000);
