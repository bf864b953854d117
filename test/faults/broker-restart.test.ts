/**
 * The broker itself restarted mid-ingest, twice: SIGKILLed, then stopped cleanly, each time
 * started again on its data. The installation (an API process and two workers, dist/main.js, on
 * the shared Elasticsearch with its own indices) uses a RabbitMQ node of its own
 * (test/helpers/fault-broker.ts), so the shared broker the other suites use is never touched.
 * Writes keep arriving throughout.
 *
 *   - every write is accepted (while the broker is away, after waiting for it up to 5 s);
 *   - every accepted item ends processed, its image counted once; nothing is dead-lettered;
 *   - after the restarts each worker process has exactly one consumer on the work queue, and
 *     no worker process died.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import amqp from 'amqplib';
import { OPERATOR, deleteInstallation, tempDir, waitFor } from '../helpers/app';
import { startFaultBroker, type FaultBroker } from '../helpers/fault-broker';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import {
  buildDist,
  freePort,
  httpClient,
  spawnService,
  stopProcess,
  type HttpClient,
} from '../helpers/processes';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const BATCH = 6;
const IMAGE_MS = 200; // slow enough that jobs are in flight and queued at each fault
const DOWN_MS = 5000; // the broker stays away this long (the API's 5 s wait runs out meanwhile)
const WRITE_ON_MS = 2000; // writes go on this long after each restart
const WORKERS = 2;

const tag = `b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const prefix = `test.${tag}.`;
const dir = tempDir('vss-broker-restart-');
const children: Array<{ name: string; child: ChildProcess }> = [];
let img: ImageServer | undefined;
let broker: FaultBroker | undefined;

beforeAll(async () => {
  buildDist();
  img = await startImageServer();
  broker = await startFaultBroker();
}, 240_000);

afterAll(async () => {
  await Promise.all(children.map(({ child }) => stopProcess(child, 'SIGKILL')));
  await img?.close();
  await deleteInstallation(ES_URL, `${tag}-`);
  await broker?.down();
}, 120_000);

function spawn(name: string, extra: Record<string, string>): ChildProcess {
  const child = spawnService(dir, name, {
    SEARCH_BACKEND: 'elasticsearch',
    ELASTICSEARCH_URL: ES_URL,
    ES_INDEX_PREFIX: `${tag}-`,
    QUEUE: 'rabbitmq',
    AMQP_URL: broker!.url,
    AMQP_QUEUE_PREFIX: prefix,
    ...extra,
  });
  children.push({ name, child });
  return child;
}

function logTails(lines = 40): string {
  return children
    .map(({ name }) => {
      const f = path.join(dir, `${name}.log`);
      const text = fs.existsSync(f) ? fs.readFileSync(f, 'utf8').trimEnd().split('\n') : [];
      return `--- ${f} (${text.length} lines)\n${text.slice(-lines).join('\n')}`;
    })
    .join('\n');
}

/** Exact counts from the queue's leader (the broker's listings lag for quorum queues). */
async function messagesIn(queue: string): Promise<number> {
  const conn = await amqp.connect(broker!.url);
  try {
    const ch = await conn.createChannel();
    return (await ch.checkQueue(queue)).messageCount;
  } finally {
    await conn.close();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

test('the broker SIGKILLed, then stopped, mid-ingest: every accepted item processed once, one consumer per worker', async () => {
  const port = await freePort();
  spawn('api', { APP_ROLES: 'api', PORT: String(port) });
  const api: HttpClient = httpClient(port);
  await api.up(60_000, logTails);
  const workers = Array.from({ length: WORKERS }, (_, i) =>
    spawn(`worker-${i + 1}`, { APP_ROLES: 'worker', WORKER_CONCURRENCY: '3', LOG_LEVEL: 'info' }),
  );

  const org = await api.call('POST', '/orgs', OPERATOR, { name: 'acme' });
  expect(org.status).toBe(201);
  const token = org.body.token as string;
  expect((await api.call('POST', '/orgs/acme/datasets', token, { name: 'd' })).status).toBe(201);
  type Counts = { items: number; processed: number; pending: number; errors: number };
  /** Polled at most 4 times a second: the token's rate limit is shared with the writes. */
  const counts = async (): Promise<Counts> => {
    for (let i = 0; ; i++) {
      await sleep(250);
      const r = await api
        .call('GET', '/orgs/acme/datasets/d', token, undefined, { timeoutMs: 30_000 })
        .catch(() => undefined);
      if (r?.status === 200) return r.body.dataset.counts as Counts;
      if (i === 100) throw new Error(`counts: ${r?.status} ${JSON.stringify(r?.body)}`);
    }
  };

  type Phase = 'before' | 'killed' | 'stopped' | 'after';
  let phase: Phase = 'before';
  const acked: string[] = [];
  const accepted = new Map<Phase, number>();
  const refused: string[] = [];
  let writing = true;
  const writer = (async () => {
    for (let n = 0; writing; n += BATCH) {
      const ids = Array.from({ length: BATCH }, (_, i) => `b${n + i + 10_000}`);
      const content = ids.map((id) => ({
        id,
        url: `${img!.url}/delayed/${id.slice(1)}.png?ms=${IMAGE_MS}`,
      }));
      const at = phase;
      const r = await api
        .call('POST', '/orgs/acme/datasets/d/content', token, { content }, { timeoutMs: 30_000 })
        .catch((e: unknown) => ({ status: 0, body: String(e) }));
      if (r.status === 202) {
        acked.push(...ids);
        accepted.set(at, (accepted.get(at) ?? 0) + 1);
      } else refused.push(`[${at}] ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      await sleep(400);
    }
  })();

  const figures: string[] = [];
  /** Takes the broker away mid-ingest for DOWN_MS, starts it again, writes on for a while. */
  const fault = async (how: 'killed' | 'stopped') => {
    const from = (await counts()).processed;
    await waitFor(
      'ingest under way',
      async () => {
        const c = await counts();
        return c.processed >= from + 20 && c.pending > 0;
      },
      60_000,
    );
    const at = await counts();
    const t0 = Date.now();
    await (how === 'killed' ? broker!.kill() : broker!.stop());
    phase = how;
    const gone = Date.now();
    await sleep(DOWN_MS);
    await broker!.start();
    const booted = Date.now();
    phase = 'after';
    // The node comes back with its durable quorum work queue. Whether its messages did is only
    // reported: a worker that reconnected first would have re-declared it and swept into it.
    const queues = await broker!.ctl('list_queues', '--no-table-headers', 'name', 'type');
    expect(queues).toContainEqual([`${prefix}jobs`, 'quorum']);
    figures.push(
      `${how} at ${JSON.stringify(at)} (took ${secs(gone - t0)}), down ${secs(booted - gone)} ` +
        `(boot included); work queue right after the start: ${await messagesIn(`${prefix}jobs`)} messages`,
    );
    await sleep(WRITE_ON_MS);
    return booted;
  };

  try {
    await fault('killed');
    const back = await fault('stopped');
    writing = false;
    await writer;
    const lastWrite = Date.now();

    await waitFor(
      'every accepted item processed',
      async () => {
        const c = await counts();
        return c.pending === 0 && c.items >= acked.length;
      },
      120_000,
    );
    figures.push(
      `all ${acked.length} processed ${secs(Date.now() - back)} after the broker was back ` +
        `(${secs(Date.now() - lastWrite)} after the last write)`,
    );
    console.log(
      `broker restarts:\n  ${figures.join('\n  ')}\n  batches accepted by phase: ` +
        JSON.stringify(Object.fromEntries(accepted)),
    );

    expect(refused).toEqual([]);
    // writes arrived and were accepted while the broker was away, each time
    expect(accepted.get('killed')).toBeGreaterThan(0);
    expect(accepted.get('stopped')).toBeGreaterThan(0);
    expect(await counts()).toEqual({
      items: acked.length,
      processed: acked.length,
      pending: 0,
      errors: 0,
    });
    const processed = new Set<string>();
    for (let offset = 0; offset < acked.length; offset += 1000) {
      const page = await api.call(
        'GET',
        `/orgs/acme/datasets/d/content?limit=1000&offset=${offset}`,
        token,
      );
      for (const e of page.body.content as Array<{ id: string; processed: boolean }>)
        if (e.processed) processed.add(e.id);
    }
    expect(acked.filter((id) => !processed.has(id))).toEqual([]);
    // jobs redelivered after each restart, or queued again by the recovery sweep, count once
    let images: unknown;
    await waitFor(
      'the image count to settle',
      async () => {
        images = (await api.call('GET', '/orgs/acme/usage', token)).body?.usage?.images?.processed;
        return images === acked.length;
      },
      15_000,
    ).catch(() => undefined);
    expect(images).toBe(acked.length);
    expect(await messagesIn(`${prefix}jobs.dead`)).toBe(0);

    // reconnected, not dead, and subscribed once each
    for (const w of workers) expect(w.exitCode).toBeNull();
    const consumers = await broker!.consumers(prefix);
    expect(consumers.map((c) => c.queue)).toEqual(workers.map(() => `${prefix}jobs`));
    expect(consumers.map((c) => c.pid).sort()).toEqual(workers.map((w) => w.pid).sort());
  } catch (e) {
    writing = false;
    console.error(
      `${figures.join('\n')}\nrefused writes: ${refused.slice(0, 10).join('\n')}\n` +
        `${logTails()}\n${broker?.logTail()}`,
    );
    throw e;
  }
}, 240_000);
