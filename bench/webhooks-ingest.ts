/**
 * What webhooks cost ingest (contract §17): images processed per second with no webhook (A)
 * against three webhooks on the organisation (B: `items.processed`; `items.failed`; all four
 * types), in rounds interleaved A, B, A, B, … in one run, each a fresh installation in this
 * process (api and worker roles), as bench/ingest.ts runs it. One item in a hundred points at a
 * missing image, so `items.failed` has something to carry. The receiver runs in another process
 * (with the image server), answers 200 and verifies every signature with the Standard Webhooks
 * library; after each B round the bench waits until every processed id has reached both
 * `items.processed` webhooks and fails if one is missing. Goal: median of B ÷ A ≥ 0.95.
 *
 *   npm run bench:webhooks   (BENCH_WEBHOOK_ITEMS (3000), BENCH_BATCH (500), WORKER_CONCURRENCY
 *                             (8), BENCH_WEBHOOK_ROUNDS (5 per mode), BENCH_SETUPS=embedded|
 *                             elasticsearch for one set-up)
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import {
  RESULTS_DIR,
  ES_URL,
  SETUPS,
  type Setup,
  call,
  cpuSeconds,
  createDataset,
  deleteInstallation,
  ingestImages,
  machine,
  median,
  pidOnPort,
  startRound,
  roundTag,
  writeResult,
} from './common';

const ITEMS = Number(process.env.BENCH_WEBHOOK_ITEMS ?? 3000);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const CONCURRENCY = process.env.WORKER_CONCURRENCY ?? '8';
const ROUNDS = Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 5);
const GOAL = 0.95;
/** Every FAIL_EVERY-th item points at a missing image (404: a permanent failure). */
const FAIL_EVERY = 100;
const HOOKS = [['items.processed'], ['items.failed'], ['all']] as const;
const ALL_TYPES = ['items.processed', 'items.failed', 'dataset.published', 'usage.threshold'];

/** What one webhook's receiver path got. */
interface PathStats {
  requests: number;
  unverified: number;
  bytes: number;
  processedIds: string[];
  failedIds: string[];
  published: number;
}

/**
 * The helper process: the images under /img/<n>.jpg (404 under /missing/) and the webhook
 * receiver under /hook/…, on one port. The parent sends `{ secret, path }` when it registers a
 * webhook and `{ report: prefix }` to read what the paths under `prefix` got.
 */
async function serveHelper(): Promise<void> {
  const images = await ingestImages();
  const secrets = new Map<string, Webhook>();
  const stats = new Map<string, { s: PathStats; processed: Set<string>; failed: Set<string> }>();
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    if (url.startsWith('/img/')) {
      const n = Number(/(\d+)\.jpg$/.exec(url)?.[1] ?? 0);
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.end(images[n % images.length]);
      return;
    }
    if (!url.startsWith('/hook/')) {
      res.writeHead(404);
      res.end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let st = stats.get(url);
      if (!st) {
        st = {
          s: {
            requests: 0,
            unverified: 0,
            bytes: 0,
            processedIds: [],
            failedIds: [],
            published: 0,
          },
          processed: new Set(),
          failed: new Set(),
        };
        stats.set(url, st);
      }
      st.s.requests++;
      st.s.bytes += raw.length;
      try {
        secrets.get(url)!.verify(raw, {
          'webhook-id': String(req.headers['webhook-id']),
          'webhook-timestamp': String(req.headers['webhook-timestamp']),
          'webhook-signature': String(req.headers['webhook-signature']),
        });
      } catch {
        st.s.unverified++;
      }
      const body = JSON.parse(raw) as {
        type: string;
        data: { ids?: string[]; errors?: Array<{ id: string }> };
      };
      if (body.type === 'items.processed') for (const id of body.data.ids!) st.processed.add(id);
      if (body.type === 'items.failed') for (const e of body.data.errors!) st.failed.add(e.id);
      if (body.type === 'dataset.published') st.s.published++;
      res.writeHead(200);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.on('message', (m: { secret?: string; path?: string; report?: string; stop?: true }) => {
    if (m.stop) server.close(() => process.exit(0));
    else if (m.secret) secrets.set(m.path!, new Webhook(m.secret));
    else if (m.report !== undefined) {
      const out: Record<string, PathStats> = {};
      for (const [p, st] of stats)
        if (p.startsWith(m.report))
          out[p] = { ...st.s, processedIds: [...st.processed], failedIds: [...st.failed] };
      process.send!({ report: m.report, stats: out });
    }
  });
  process.send!((server.address() as AddressInfo).port);
}

interface Helper {
  url: string;
  pid: number;
  child: ChildProcess;
  register(hookPath: string, secret: string): void;
  report(prefix: string): Promise<Record<string, PathStats>>;
  close(): void;
}

async function helper(): Promise<Helper> {
  const child = fork(__filename, ['serve-helper'], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (p) => resolve(p as number));
    child.once('exit', (code) => reject(new Error(`helper exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    child,
    register: (hookPath, secret) => child.send({ path: hookPath, secret }),
    report: (prefix) =>
      new Promise((resolve) => {
        const on = (m: { report?: string; stats?: Record<string, PathStats> }) => {
          if (m.report !== prefix) return;
          child.off('message', on);
          resolve(m.stats!);
        };
        child.on('message', on);
        child.send({ report: prefix });
      }),
    close: () => child.send({ stop: true }),
  };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function run(
  setup: Setup,
  h: Helper,
  mode: 'A' | 'B',
  round: number,
): Promise<Record<string, unknown>> {
  const tag = roundTag('benchwh');
  const app = await startRound(setup, tag, CONCURRENCY);
  try {
    const { orgToken } = await createDataset(app, 'ingest');
    const base = app.url!;
    const prefix = `/hook/${tag}/`;
    if (mode === 'B') {
      for (const [i, events] of HOOKS.entries()) {
        const hookPath = `${prefix}${i}`;
        const r = await call(base, 'POST', '/orgs/bench/webhooks', orgToken, {
          url: h.url + hookPath,
          events: events[0] === 'all' ? ALL_TYPES : events,
        });
        if (r.status !== 201) throw new Error(`webhook: ${r.status} ${JSON.stringify(r.body)}`);
        h.register(hookPath, r.body.secret as string);
      }
    }
    // the workers read the webhook directory once a second: both modes wait alike
    await wait(1100);
    const esPid = setup.env.SEARCH_BACKEND ? pidOnPort(9200) : undefined;
    const cpu0 = process.cpuUsage();
    const es0 = esPid ? cpuSeconds(esPid) : 0;
    const load0 = os.loadavg()[0]!;
    const start = Date.now();
    for (let b = 0; b < ITEMS; b += BATCH) {
      const content = Array.from({ length: Math.min(BATCH, ITEMS - b) }, (_, i) => {
        const n = b + i;
        return {
          id: `item-${n}`,
          url:
            n % FAIL_EVERY === FAIL_EVERY - 1
              ? `${h.url}/missing/${n}.jpg`
              : `${h.url}/img/${n}.jpg`,
          metadata: { category: `c${n % 12}`, price: n % 500 },
        };
      });
      const r = await call(base, 'POST', '/orgs/bench/datasets/ingest/content', orgToken, {
        content,
      });
      if (r.status !== 202) throw new Error(`POST content: ${r.status} ${JSON.stringify(r.body)}`);
    }
    let counts: { processed: number; errors: number } = { processed: 0, errors: 0 };
    for (;;) {
      counts = (await call(base, 'GET', '/orgs/bench/datasets/ingest', orgToken)).body.dataset
        .counts;
      if (counts.processed + counts.errors === ITEMS) break;
      await wait(200);
    }
    const seconds = (Date.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const esCpu = esPid ? cpuSeconds(esPid) - es0 : 0;
    const out: Record<string, unknown> = {
      round,
      mode,
      setup: setup.name,
      webhooks: mode === 'B' ? HOOKS.length : 0,
      items: ITEMS,
      processed: counts.processed,
      failed: counts.errors,
      seconds,
      processed_per_s: Math.round((counts.processed / seconds) * 10) / 10,
      // this process holds the service and the bench's client; the helper's CPU is not in it
      service_cpu_ms_per_item: Math.round(((cpu.user + cpu.system) / 1e3 / ITEMS) * 100) / 100,
      // other work on this machine: the 1-minute load average at the start and at the end
      load_1m: [load0, os.loadavg()[0]!].map((l) => Math.round(l * 10) / 10),
      ...(esPid ? { es_cpu_ms_per_item: Math.round((esCpu / ITEMS) * 1e5) / 100 } : {}),
    };
    if (setup.env.SEARCH_BACKEND) out.es_ops = await esOps(`${tag}-`);
    if (mode === 'B') out.deliveries = await checkDeliveries(h, prefix, counts);
    process.stderr.write(`${JSON.stringify(out)}\n`);
    return out;
  } finally {
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

/**
 * What the round asked of Elasticsearch, per index of the installation (items indices as one):
 * documents indexed and deleted, searches, realtime gets and refreshes. Read when the items are
 * all done, so a B round's tail of deliveries is not in it.
 */
async function esOps(prefix: string): Promise<Record<string, number[]>> {
  const r = await fetch(`${ES_URL}/${prefix}*/_stats/indexing,search,get,refresh`);
  const body = (await r.json()) as {
    indices: Record<
      string,
      {
        primaries: {
          indexing: { index_total: number; delete_total: number };
          search: { query_total: number };
          get: { total: number };
          refresh: { total: number };
        };
      }
    >;
  };
  const out: Record<string, number[]> = {};
  for (const [name, { primaries: p }] of Object.entries(body.indices)) {
    const key = name.slice(prefix.length).startsWith('items-')
      ? 'items'
      : name.slice(prefix.length);
    const row = [
      p.indexing.index_total,
      p.indexing.delete_total,
      p.search.query_total,
      p.get.total,
      p.refresh.total,
    ];
    out[key] = (out[key] ?? [0, 0, 0, 0, 0]).map((v, i) => v + row[i]!);
  }
  return out;
}

/**
 * Waits (outside the timed part) until every processed id has reached both `items.processed`
 * webhooks and every failure the `items.failed` ones; throws naming what is missing.
 */
async function checkDeliveries(
  h: Helper,
  prefix: string,
  counts: { processed: number; errors: number },
): Promise<Record<string, unknown>> {
  const want = Array.from({ length: ITEMS }, (_, n) => n)
    .filter((n) => n % FAIL_EVERY !== FAIL_EVERY - 1)
    .map((n) => `item-${n}`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const got = await h.report(prefix);
    const ofHook = (i: number) => got[`${prefix}${i}`];
    const missing = [0, 2].map((i) => {
      const ids = new Set(ofHook(i)?.processedIds ?? []);
      return want.filter((id) => !ids.has(id)).length;
    });
    const failedSeen = [1, 2].map((i) => ofHook(i)?.failedIds.length ?? 0);
    const done =
      missing.every((m) => m === 0) &&
      failedSeen.every((n) => n === counts.errors) &&
      (ofHook(2)?.published ?? 0) >= 1;
    if (done || Date.now() > deadline) {
      const summary = {
        requests: HOOKS.map((_, i) => ofHook(i)?.requests ?? 0),
        kb: HOOKS.map((_, i) => Math.round((ofHook(i)?.bytes ?? 0) / 1024)),
        unverified: HOOKS.map((_, i) => ofHook(i)?.unverified ?? 0),
        processed_ids_missing: missing,
        failed_ids_seen: failedSeen,
        published: ofHook(2)?.published ?? 0,
      };
      if (!done || summary.unverified.some((u) => u > 0))
        throw new Error(`webhook deliveries incomplete: ${JSON.stringify(summary)}`);
      return summary;
    }
    await wait(250);
  }
}

/**
 * With BENCH_SETUPS naming one set-up, the other set-up's figures already in the result file
 * are kept beside the new ones (each summary and run names its set-up and the file its dates).
 */
function keptFigures(only: string | undefined): {
  dates?: string[];
  summary?: Array<Record<string, unknown>>;
  runs?: Array<Record<string, unknown>>;
} {
  const file = path.join(RESULTS_DIR, 'webhooks-ingest.json');
  if (!only || !fs.existsSync(file)) return {};
  const old = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    date: string;
    dates?: string[];
    summary: Array<{ setup: string }>;
    runs: Array<{ setup: string }>;
  };
  const other = (x: { setup: string }) => !x.setup.startsWith(only);
  return {
    dates: [...(old.dates ?? [old.date]), new Date().toISOString()],
    summary: old.summary.filter(other),
    runs: old.runs.filter(other),
  };
}

async function main(): Promise<void> {
  const h = await helper();
  const runs: Array<Record<string, unknown>> = [];
  const only = process.env.BENCH_SETUPS;
  const summary: Array<Record<string, unknown>> = [];
  let file = '';
  const kept = keptFigures(only);
  try {
    for (const s of SETUPS.filter((x) => !only || x.name.startsWith(only))) {
      const mine: Array<Record<string, unknown>> = [];
      for (let round = 1; round <= ROUNDS; round++)
        for (const mode of ['A', 'B'] as const) mine.push(await run(s, h, mode, round));
      runs.push(...mine);
      const of = (m: string, k: string) =>
        mine.filter((r) => r.mode === m).map((r) => r[k] as number);
      const [a, b] = [of('A', 'processed_per_s'), of('B', 'processed_per_s')];
      const ratios = a.map((x, i) => Math.round((b[i]! / x) * 1000) / 1000);
      const cpu = (k: string) => ({ a: median(of('A', k)), b: median(of('B', k)) });
      summary.push({
        setup: s.name,
        a_processed_per_s: a,
        b_processed_per_s: b,
        round_ratios_b_over_a: ratios,
        median_ratio_b_over_a: median(ratios),
        ratio_of_medians: Math.round((median(b) / median(a)) * 1000) / 1000,
        goal: GOAL,
        met: median(ratios) >= GOAL,
        // less sensitive than throughput to other work on the machine
        median_service_cpu_ms_per_item: cpu('service_cpu_ms_per_item'),
        ...(s.env.SEARCH_BACKEND ? { median_es_cpu_ms_per_item: cpu('es_cpu_ms_per_item') } : {}),
      });
      // written after every set-up, so a later one failing keeps what was measured
      file = writeResult('webhooks-ingest', {
        ...kept,
        benchmark: 'webhooks-ingest',
        date: new Date().toISOString(),
        machine: machine(),
        note: `one process with api and worker roles; ${ITEMS} items in batches of ${BATCH}, 1 in ${FAIL_EVERY} a missing image; A = no webhook, B = 3 webhooks (items.processed; items.failed; all four types) to a verifying receiver in another process; rounds A, B interleaved`,
        summary: [...(kept.summary ?? []), ...summary],
        runs: [...(kept.runs ?? []), ...runs],
      });
    }
  } finally {
    h.close();
  }
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\nwritten to ${file}\n`);
}

(process.argv[2] === 'serve-helper' ? serveHelper() : main()).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
