import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startApp, type RunningApp } from '../../src/app/start';
import { loadConfig } from '../../src/config/env';

export const OPERATOR = 'test-operator-token-0123456789';
export const V2 = 'application/vnd.service.v2+json';

export interface Res<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TestApp {
  url: string;
  /** The first API host (with the embedded engine, the only process). */
  app: RunningApp;
  /** Every process of the installation: API hosts first, then workers. */
  hosts: RunningApp[];
  /** The clock every process of the installation runs on (buildContainer's `now`). */
  clock: TestClock;
  dataDir: string;
  call<T = any>(
    method: string,
    p: string,
    opts?: {
      token?: string;
      body?: unknown;
      raw?: string | Buffer;
      headers?: Record<string, string>;
    },
  ): Promise<Res<T>>;
  /** `call` on one API host (`call` itself takes them in turns). */
  callOn<T = any>(host: number, ...args: Parameters<TestApp['call']>): Promise<Res<T>>;
  /**
   * Every charge the API hosts admitted is recorded: on Elasticsearch they are written in
   * batches after the answer, so a usage report read at once may lag by a batch.
   */
  chargesRecorded(): Promise<void>;
  /** Stops every process; `keep` leaves the installation's indices for a restart. */
  stop(opts?: { keep?: boolean }): Promise<void>;
}

/**
 * Real time, plus every `advance`: a test moves the installation past a deadline (a memo's time,
 * a job's age) at once instead of sleeping through it. `hold` stops it where it is, so what was
 * just read stays fresh while a test looks, until `release` lets it go on from there. Left alone
 * it reads what Date.now reads.
 */
export interface TestClock {
  now(): number;
  advance(ms: number): void;
  hold(): void;
  release(): void;
}

function testClock(): TestClock {
  let offset = 0;
  let heldAt: number | undefined;
  return {
    now: () => (heldAt ?? Date.now()) + offset,
    advance: (ms) => {
      offset += ms;
    },
    hold: () => {
      heldAt ??= Date.now();
    },
    release: () => {
      if (heldAt === undefined) return;
      offset -= Date.now() - heldAt;
      heldAt = undefined;
    },
  };
}

export function tempDir(prefix = 'vss-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Engines under test: `TEST_SEARCH_BACKEND=elasticsearch` and `TEST_QUEUE=rabbitmq` (set by the
 * production jest project) run the suites on the real services, each app on its own indices
 * and queues.
 */
export const SEARCH_BACKEND = process.env.TEST_SEARCH_BACKEND ?? 'embedded';
export const QUEUE = process.env.TEST_QUEUE ?? 'inprocess';

function backendEnv(): Record<string, string> {
  const tag = `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const env: Record<string, string> = {};
  if (SEARCH_BACKEND === 'elasticsearch')
    Object.assign(env, {
      SEARCH_BACKEND,
      ELASTICSEARCH_URL: process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200',
      ES_INDEX_PREFIX: `${tag}-`,
    });
  if (QUEUE === 'rabbitmq')
    Object.assign(env, {
      QUEUE,
      AMQP_URL: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
      AMQP_QUEUE_PREFIX: `test.${tag}.`,
    });
  return env;
}

/** The backend settings of each installation, by data directory, so a restart finds it again. */
const installations = new Map<string, Record<string, string>>();

export const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

/**
 * The whole service in this process, on free ports. With the embedded engine: one process on
 * a data directory. With Elasticsearch (the production project): an installation of two API
 * hosts and two workers that share nothing but Elasticsearch and RabbitMQ — each is given a
 * DATA_DIR it cannot use (a regular file), and `call` alternates between the API hosts, so
 * every suite proves that any host sees what another did (contract §12). Passing `APP_ROLES`
 * starts one process with those roles instead.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  dataDir = tempDir(),
): Promise<TestApp> {
  let be = installations.get(dataDir);
  if (!be) installations.set(dataDir, (be = backendEnv()));
  const shared = SEARCH_BACKEND === 'elasticsearch';
  const multi = shared && !env.APP_ROLES;
  let ports = multi ? [await freePort(), await freePort()] : [0];
  const hostDir = shared ? path.join(dataDir, 'not-a-directory') : dataDir;
  if (shared)
    fs.writeFileSync(hostDir, 'no process of a production installation may use DATA_DIR\n');
  const clock = testClock();
  const start = (extra: Record<string, string>) =>
    startApp(
      loadConfig({
        ...be,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: hostDir,
        OPERATOR_TOKEN: OPERATOR,
        IMAGE_FETCH_ALLOW_PRIVATE: 'true',
        RETRY_BASE_MS: '50',
        LOG_LEVEL: 'silent',
        // the fast embedder unless a suite is about embedders (test/e2e/default-embedder.test.ts
        // runs the default, the learned hybrid, on both engines)
        EMBEDDER: 'descriptor',
        // no duplicate pass unless a suite is about it: on a few hundred look-alike test images
        // it is most of a worker's CPU after an ingest (test/e2e/duplicates.test.ts turns it on)
        DUPLICATE_REPORT: 'off',
        ...(multi ? { PUBLIC_BASE_URL: `http://127.0.0.1:${ports[0]}` } : {}),
        ...env,
        ...extra,
      }),
      { log: pino({ level: 'silent' }), now: clock.now },
    );
  const hosts: RunningApp[] = [];
  // A port freePort() saw free can be taken by a parallel suite before the host listens on it
  // (CI saw EADDRINUSE): start again on other ports.
  for (let attempt = 1; ; attempt++) {
    try {
      if (multi) {
        for (const port of ports) hosts.push(await start({ APP_ROLES: 'api', PORT: String(port) }));
        for (let i = 0; i < 2; i++) hosts.push(await start({ APP_ROLES: 'worker' }));
      } else hosts.push(await start({}));
      break;
    } catch (e) {
      await Promise.all(hosts.splice(0).map((h) => h.stop()));
      if (!multi || attempt >= 3 || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      ports = [await freePort(), await freePort()];
    }
  }
  const api = hosts.filter((h) => h.url);
  const url = api[0].url!;
  let turn = 0;
  const callOn: TestApp['callOn'] = async (index, method, p, opts = {}) => {
    const headers: Record<string, string> = { accept: V2, ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `token ${opts.token}`;
    let body: string | Buffer | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const host = api[index % api.length].url!;
    const r = await fetch(host + p, { method, headers, body });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: r.status, headers: r.headers, body: parsed as never };
  };
  return {
    url,
    app: api[0],
    hosts,
    clock,
    dataDir,
    call: (method, p, opts) => callOn(turn++, method, p, opts),
    callOn,
    async chargesRecorded() {
      await Promise.all(hosts.map((h) => h.container.services.metering.drain()));
    },
    async stop(opts = {}) {
      await Promise.all(hosts.map((h) => h.stop()));
      if (be.ES_INDEX_PREFIX && !opts.keep) {
        installations.delete(dataDir);
        await deleteInstallation(be.ELASTICSEARCH_URL, be.ES_INDEX_PREFIX);
      }
    },
  };
}

/** Removes an installation's indices and its item index template from Elasticsearch. */
export async function deleteInstallation(esUrl: string, prefix: string): Promise<void> {
  await fetch(`${esUrl}/${prefix}*`, { method: 'DELETE' }).catch(() => undefined);
  await fetch(`${esUrl}/_index_template/${prefix}items`, { method: 'DELETE' }).catch(
    () => undefined,
  );
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** An organisation with a dataset; returns the tokens. */
export async function setupDataset(
  t: TestApp,
  org = 'acme',
  ds = 'shoes',
): Promise<{ orgToken: string; dsToken: string; base: string }> {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: org } });
  if (o.status !== 201) throw new Error(`org: ${JSON.stringify(o.body)}`);
  const d = await t.call('POST', `/orgs/${org}/datasets`, {
    token: o.body.token,
    body: { name: ds },
  });
  if (d.status !== 201) throw new Error(`dataset: ${JSON.stringify(d.body)}`);
  return {
    orgToken: o.body.token,
    dsToken: d.body.dataset.browse_token,
    base: `/orgs/${org}/datasets/${ds}`,
  };
}

export async function waitProcessed(
  t: TestApp,
  base: string,
  orgToken: string,
  n: number,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    `${n} processed items`,
    async () => {
      const r = await t.call('GET', base, { token: orgToken });
      return (
        r.body.dataset.counts.processed + r.body.dataset.counts.errors >= n &&
        r.body.dataset.counts.pending === 0
      );
    },
    timeoutMs,
  );
}
