import amqp from 'amqplib';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import sharp from 'sharp';
import { Pool } from 'undici';
import { startApp, type RunningApp } from 'visual-search-service/dist/app/start';
import { loadConfig, type Config } from 'visual-search-service/dist/config/env';

export const OPERATOR = 'bench-operator-token-0123456789';
export const V2 = 'application/vnd.service.v2+json';
export const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
export const RESULTS_DIR = path.join(__dirname, '..', 'results');

export type Engine = 'embedded' | 'elasticsearch';

export interface Setup {
  name: string;
  env: Record<string, string>;
}

/** The two ways to run the service that benches compare side by side. */
export const SETUPS: Setup[] = [
  { name: 'embedded + in-process queue', env: {} },
  {
    name: 'elasticsearch + rabbitmq',
    env: {
      SEARCH_BACKEND: 'elasticsearch',
      ELASTICSEARCH_URL: ES_URL,
      QUEUE: 'rabbitmq',
      AMQP_URL,
    },
  },
];

/** A name for one round's indices and queues: `name` and the time. */
export const roundTag = (name: string): string => `${name}${Date.now().toString(36)}`;

/**
 * A fresh installation of `setup` for one round of an ingest bench: index and queue names of its
 * own (`tag`, which roundTag makes unique), private image hosts allowed, `concurrency` workers.
 */
export function startRound(
  setup: Setup,
  tag: string,
  concurrency: string,
  env: Record<string, string> = {},
): Promise<RunningApp> {
  return startService({
    ...setup.env,
    ...(setup.env.SEARCH_BACKEND ? { ES_INDEX_PREFIX: `${tag}-` } : {}),
    ...(setup.env.QUEUE ? { AMQP_QUEUE_PREFIX: `${tag}.` } : {}),
    IMAGE_FETCH_ALLOW_PRIVATE: 'true',
    WORKER_CONCURRENCY: concurrency,
    ...env,
  });
}

/** The service in this process, as `npm start` would run it, on a fresh data directory. */
export async function startService(env: Record<string, string>): Promise<RunningApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-bench-'));
  // The Elasticsearch engine takes its jobs from RabbitMQ (contract §12); one local node holds
  // no replicas.
  const shared =
    env.SEARCH_BACKEND === 'elasticsearch'
      ? {
          QUEUE: 'rabbitmq',
          AMQP_URL,
          AMQP_QUEUE_PREFIX: `bench.${Date.now().toString(36)}.`,
          ELASTICSEARCH_REPLICAS: '0',
        }
      : {};
  const config = loadConfig({
    ...shared,
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    OPERATOR_TOKEN: OPERATOR,
    RATE_LIMIT_PER_MINUTE: '0',
    LOG_LEVEL: 'warn',
    ...env,
  });
  return startApp(config, { log: pino({ level: 'warn' }) });
}

export async function call<T = any>(
  base: string,
  method: string,
  p: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const r = await fetch(base + p, {
    method,
    headers: {
      accept: V2,
      authorization: `token ${token}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: (await r.json()) as T };
}

/** Creates org `bench` and dataset `name`; returns the org token, browse token and dataset id. */
export async function createDataset(
  app: RunningApp,
  name: string,
): Promise<{ orgToken: string; dsToken: string; datasetId: string }> {
  const base = app.url!;
  const org = await call(base, 'POST', '/orgs', OPERATOR, { name: 'bench' });
  if (org.status !== 201) throw new Error(`org: ${JSON.stringify(org.body)}`);
  const orgToken = org.body.token as string;
  const ds = await call(base, 'POST', '/orgs/bench/datasets', orgToken, { name });
  if (ds.status !== 201) throw new Error(`dataset: ${JSON.stringify(ds.body)}`);
  const stored = await app.container.ports.accounts.getDataset('bench', name);
  return { orgToken, dsToken: ds.body.dataset.browse_token as string, datasetId: stored!.id };
}

function percentile(sorted: number[], p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** Each request's time in ms, `requests` of them after `warmup` untimed ones. */
export async function timed(
  run: (i: number) => Promise<void>,
  requests: number,
  warmup: number,
): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await run(i);
  const ms: number[] = [];
  for (let i = 0; i < requests; i++) {
    const t = process.hrtime.bigint();
    await run(i);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return ms;
}

/** The middle value (the mean of the middle two for an even count), to two decimals. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return Math.round((s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2) * 100) / 100;
}

export function summarize(ms: number[]): { n: number; p50: number; p95: number; mean: number } {
  const s = [...ms].sort((a, b) => a - b);
  const round = (x: number): number => Math.round(x * 100) / 100;
  return {
    n: s.length,
    p50: round(percentile(s, 50)),
    p95: round(percentile(s, 95)),
    mean: round(s.reduce((a, b) => a + b, 0) / s.length),
  };
}

export function machine(): Record<string, unknown> {
  return {
    node: process.version,
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model,
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
  };
}

export function writeResult(name: string, result: unknown): string {
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  return file;
}

/** A small deterministic PRNG, so every run measures the same catalogue. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A deterministic pseudo-random unit vector, for loading engines without images. */
export function unitVector(dims: number, seed: number): number[] {
  const rand = rng(seed);
  const v = Array.from({ length: dims }, () => rand() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

/**
 * Removes what a bench installation left: its data directory, its Elasticsearch indices and
 * item template, and every RabbitMQ queue of its prefix (work, dead-letter and the per-delay
 * retry queues, which are quorum queues and would otherwise stay on the broker).
 */
export async function deleteInstallation(config: Config): Promise<void> {
  fs.rmSync(config.dataDir, { recursive: true, force: true });
  if (config.SEARCH_BACKEND === 'elasticsearch') {
    const es = config.ELASTICSEARCH_URL[0];
    await fetch(`${es}/${config.ES_INDEX_PREFIX}*`, { method: 'DELETE' }).catch(() => undefined);
    await fetch(`${es}/_index_template/${config.ES_INDEX_PREFIX}items`, {
      method: 'DELETE',
    }).catch(() => undefined);
  }
  if (config.QUEUE !== 'rabbitmq') return;
  const prefix = config.AMQP_QUEUE_PREFIX;
  let names = [`${prefix}jobs`, `${prefix}jobs.dead`];
  try {
    names = execFileSync('rabbitmqctl', ['-q', 'list_queues', 'name'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim())
      .filter((n) => n.startsWith(prefix));
  } catch {
    // no local broker tools: the two fixed names only
  }
  const conn = await amqp.connect(config.AMQP_URL).catch(() => undefined);
  if (!conn) return;
  try {
    const ch = await conn.createChannel();
    for (const n of names) await ch.deleteQueue(n);
  } finally {
    await conn.close();
  }
}

/** The pid listening on a local TCP port (Elasticsearch, RabbitMQ), or undefined. */
export function pidOnPort(port: number): number | undefined {
  try {
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const m = /pid=(\d+)/.exec(out);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // the fields after the command name, which is in parentheses and may hold spaces
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/**
 * GET requests to the service over one kept-alive undici connection: the same HTTP client the
 * Elasticsearch client uses for the direct queries the gateway is compared with (Node's fetch
 * costs 0.4 ms more per request at p50 and 1.4 ms at p95 here, which is the client's, not the
 * gateway's).
 */
export function gatewayClient(url: string): {
  get<T = any>(p: string, token: string): Promise<{ status: number; body: T }>;
  close(): Promise<void>;
} {
  const pool = new Pool(url, { connections: 1 });
  return {
    async get(p, token) {
      const r = await pool.request({
        method: 'GET',
        path: p,
        headers: { accept: V2, authorization: `token ${token}` },
      });
      return { status: r.statusCode, body: (await r.body.json()) as never };
    },
    close: () => pool.close(),
  };
}

/**
 * The exact top `k` by dot product (cosine on unit vectors): indices into `vectors`, best
 * first, ties by index; `exclude` leaves one index out (the query item itself). The truth
 * that HNSW recall is measured against.
 */
export function exactTop(
  vectors: readonly Float32Array[],
  q: Float32Array,
  k: number,
  exclude = -1,
): number[] {
  const scored: Array<{ i: number; d: number }> = [];
  vectors.forEach((v, i) => {
    if (i === exclude) return;
    let d = 0;
    for (let j = 0; j < v.length; j++) d += v[j]! * q[j]!;
    scored.push({ i, d });
  });
  scored.sort((a, b) => b.d - a.d || a.i - b.i);
  return scored.slice(0, k).map((s) => s.i);
}

/** 20 distinct 800×600 JPEGs (about 40 KB each). */
export function ingestImages(): Promise<Buffer[]> {
  return Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      sharp({
        create: {
          width: 800,
          height: 600,
          channels: 3,
          background: { r: i * 12, g: 90, b: 200 - i * 9 },
        },
      })
        .composite([
          {
            input: Buffer.from(
              `<svg width="800" height="600"><circle cx="${100 + i * 30}" cy="300" r="120" fill="white"/></svg>`,
            ),
          },
        ])
        .jpeg({ quality: 85 })
        .toBuffer(),
    ),
  );
}
