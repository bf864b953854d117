import fs from 'node:fs';
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
  app: RunningApp;
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
  stop(): Promise<void>;
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

export function backendEnv(): Record<string, string> {
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

/** The whole service in this process on a free port, with a fresh data directory. */

export async function startTestApp(
  env: Record<string, string> = {},
  dataDir = tempDir(),
): Promise<TestApp> {
  const be = backendEnv();
  const config = loadConfig({
    ...be,
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    OPERATOR_TOKEN: OPERATOR,
    IMAGE_FETCH_ALLOW_PRIVATE: 'true',
    RETRY_BASE_MS: '50',
    LOG_LEVEL: 'silent',
    ...env,
  });
  const app = await startApp(config, { log: pino({ level: 'silent' }) });
  const url = app.url!;
  return {
    url,
    app,
    dataDir,
    async call(method, p, opts = {}) {
      const headers: Record<string, string> = { accept: V2, ...(opts.headers ?? {}) };
      if (opts.token) headers.authorization = `token ${opts.token}`;
      let body: string | Buffer | undefined;
      if (opts.raw !== undefined) body = opts.raw;
      else if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
      const r = await fetch(url + p, { method, headers, body });
      const text = await r.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      return { status: r.status, headers: r.headers, body: parsed as never };
    },
    async stop() {
      await app.stop();
      if (be.ES_INDEX_PREFIX) {
        await fetch(`${be.ELASTICSEARCH_URL}/${be.ES_INDEX_PREFIX}*`, { method: 'DELETE' }).catch(
          () => undefined,
        );
      }
    },
  };
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
