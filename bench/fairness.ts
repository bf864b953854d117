/**
 * Worker fairness (issue 14): tenant A points 300 items at an image host that answers each
 * image after 3 s; tenant B's 50 items on a fast host must still finish within twice the time
 * they take on an idle service. Both production shapes, WORKER_CONCURRENCY=4 (the default).
 *
 *   npm run bench:fairness
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import sharp from 'sharp';
import type { RunningApp } from 'visual-search-service/dist/app/start';
import {
  SETUPS,
  type Setup,
  OPERATOR,
  call,
  deleteInstallation,
  machine,
  startService,
  writeResult,
} from './common';

const CONCURRENCY = 4;
const SLOW_MS = 3000;
const A_ITEMS = 300;
const B_ITEMS = 50;
const WARM_ITEMS = 10;
/** A's head start: its first jobs hold every worker and its backlog sits ahead of B's. */
const HEAD_START_MS = 2000;
/**
 * FairShare counts an organisation as active for 10 s after its last job (ACTIVE_ORG_MS in
 * src/jobs/fair-share.ts). B waits that out after its idle run, so A meets a worker that has
 * forgotten B: the case of the finding, a tenant arriving after another took the workers.
 */
const FORGET_MS = 11_000;
const GOAL = 2;
/** First item (and image) number of each batch: every item has its own image. */
const FIRST = {
  warm: 0,
  idle: WARM_ITEMS,
  a: WARM_ITEMS + B_ITEMS,
  contended: WARM_ITEMS + B_ITEMS + A_ITEMS,
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One distinct 320×240 JPEG per item (a few KB), so no two downloads share bytes. */
function makeImages(n: number): Promise<Buffer[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) =>
      sharp({
        create: {
          width: 320,
          height: 240,
          channels: 3,
          background: { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 },
        },
      })
        .composite([
          {
            input: Buffer.from(
              `<svg width="320" height="240"><circle cx="${20 + (i % 280)}" cy="${20 + ((i * 7) % 200)}" r="${10 + (i % 40)}" fill="white"/></svg>`,
            ),
          },
        ])
        .jpeg({ quality: 80 })
        .toBuffer(),
    ),
  );
}

/** An image host on its own port (its own host:port for FairShare), answering after `delayMs`. */
async function imageHost(
  images: Buffer[],
  delayMs: number,
): Promise<{ url: string; requests: () => number; close(): void }> {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    const n = Number(/(\d+)\.jpg$/.exec(req.url ?? '')?.[1] ?? 0);
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.end(images[n % images.length]);
    }, delayMs);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => server.close(),
  };
}

/** An organisation with its datasets; returns its token. */
async function tenant(base: string, org: string, datasets: string[]): Promise<string> {
  const o = await call(base, 'POST', '/orgs', OPERATOR, { name: org });
  if (o.status !== 201) throw new Error(`org ${org}: ${JSON.stringify(o.body)}`);
  const token = o.body.token as string;
  for (const name of datasets) {
    const d = await call(base, 'POST', `/orgs/${org}/datasets`, token, { name });
    if (d.status !== 201) throw new Error(`dataset ${name}: ${JSON.stringify(d.body)}`);
  }
  return token;
}

/** POSTs items first…first+n-1 (their image numbers too) in one batch. */
async function push(
  base: string,
  token: string,
  dsPath: string,
  host: string,
  first: number,
  n: number,
): Promise<void> {
  const content = Array.from({ length: n }, (_, i) => ({
    id: `item-${first + i}`,
    url: `${host}/img/${first + i}.jpg`,
    metadata: { category: `c${(first + i) % 12}` },
  }));
  const r = await call(base, 'POST', `/orgs/${dsPath}/content`, token, { content });
  if (r.status !== 202) throw new Error(`POST content: ${r.status} ${JSON.stringify(r.body)}`);
}

async function counts(
  base: string,
  token: string,
  dsPath: string,
): Promise<Record<string, number>> {
  return (await call(base, 'GET', `/orgs/${dsPath}`, token)).body.dataset.counts;
}

/**
 * Pushes B's items and polls until all are processed: wall time from the POST, and until the
 * first one was processed (how long B waited for a worker at all), in ms.
 */
async function timeB(
  base: string,
  token: string,
  dsPath: string,
  host: string,
  first: number,
): Promise<{ ms: number; firstMs: number }> {
  const start = Date.now();
  let firstMs = 0;
  await push(base, token, dsPath, host, first, B_ITEMS);
  for (;;) {
    const c = await counts(base, token, dsPath);
    if (c.errors! > 0) throw new Error(`${dsPath}: processing errors ${JSON.stringify(c)}`);
    if (c.processed! > 0 && !firstMs) firstMs = Date.now() - start;
    if (c.processed === B_ITEMS) return { ms: Date.now() - start, firstMs };
    await sleep(50);
  }
}

async function run(
  setup: Setup,
  fast: Awaited<ReturnType<typeof imageHost>>,
  slow: Awaited<ReturnType<typeof imageHost>>,
): Promise<Record<string, unknown>> {
  const tag = `benchfair${Date.now().toString(36)}`;
  const app: RunningApp = await startService({
    ...setup.env,
    ...(setup.env.SEARCH_BACKEND ? { ES_INDEX_PREFIX: `${tag}-` } : {}),
    ...(setup.env.QUEUE ? { AMQP_QUEUE_PREFIX: `${tag}.` } : {}),
    IMAGE_FETCH_ALLOW_PRIVATE: 'true',
    WORKER_CONCURRENCY: String(CONCURRENCY),
  });
  const base = app.url!;
  try {
    const b = await tenant(base, 'tenant-b', ['warm', 'idle', 'contended']);
    const a = await tenant(base, 'tenant-a', ['slow']);
    // Warm-up (JIT, sharp, first index writes) so the idle figure is not a cold start.
    await push(base, b, 'tenant-b/datasets/warm', fast.url, FIRST.warm, WARM_ITEMS);
    while ((await counts(base, b, 'tenant-b/datasets/warm')).processed! < WARM_ITEMS)
      await sleep(50);
    const load = os.loadavg()[0];
    const idle = await timeB(base, b, 'tenant-b/datasets/idle', fast.url, FIRST.idle);
    await sleep(FORGET_MS);

    const slowBefore = slow.requests();
    await push(base, a, 'tenant-a/datasets/slow', slow.url, FIRST.a, A_ITEMS);
    await sleep(HEAD_START_MS);
    const queueAtB = await app.container.ports.queue.stats();
    const contended = await timeB(
      base,
      b,
      'tenant-b/datasets/contended',
      fast.url,
      FIRST.contended,
    );
    const aDone = (await counts(base, a, 'tenant-a/datasets/slow')).processed!;
    const out = {
      setup: setup.name,
      worker_concurrency: CONCURRENCY,
      idle_ms: idle.ms,
      contended_ms: contended.ms,
      ratio: Math.round((contended.ms / idle.ms) * 100) / 100,
      goal: `<= ${GOAL}`,
      goal_met: contended.ms <= GOAL * idle.ms,
      idle_first_processed_ms: idle.firstMs,
      contended_first_processed_ms: contended.firstMs,
      // A must keep moving: its processed items and downloads started by the end of B's run.
      a_processed_by_b_end: aDone,
      a_downloads_started_by_b_end: slow.requests() - slowBefore,
      queue_when_b_pushed: queueAtB,
      load_avg_1m_before: Math.round(load! * 100) / 100,
    };
    process.stderr.write(`${JSON.stringify(out)}\n`);
    return out;
  } finally {
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function main(): Promise<void> {
  const images = await makeImages(FIRST.contended + B_ITEMS);
  const fast = await imageHost(images, 0);
  const slow = await imageHost(images, SLOW_MS);
  const runs: Array<Record<string, unknown>> = [];
  try {
    for (const s of SETUPS) runs.push(await run(s, fast, slow));
  } finally {
    fast.close();
    slow.close();
  }
  const file = writeResult('fairness', {
    benchmark: 'fairness',
    date: new Date().toISOString(),
    machine: machine(),
    note:
      `one process with api and worker roles, WORKER_CONCURRENCY=${CONCURRENCY}; tenant A: ` +
      `${A_ITEMS} items on a host answering after ${SLOW_MS} ms, ${HEAD_START_MS} ms head ` +
      `start; tenant B: ${B_ITEMS} items (320x240 JPEG) on a fast host, timed from its POST ` +
      `until all are processed, alone (idle) and behind A (contended)`,
    runs,
  });
  const row = (c: unknown[]): string => `${c.map((x) => String(x).padStart(12)).join(' ')}\n`;
  let table = `${'setup'.padEnd(30)}${row(['idle ms', 'contended ms', 'ratio', 'goal <= 2', 'A done'])}`;
  for (const r of runs)
    table += `${String(r.setup).padEnd(30)}${row([r.idle_ms, r.contended_ms, r.ratio, r.goal_met ? 'met' : 'MISSED', r.a_processed_by_b_end])}`;
  process.stdout.write(`${table}written to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
