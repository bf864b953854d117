/**
 * Memory under images that are small in bytes and huge in pixels (issue 14). The service runs in
 * a child process, so its RSS is measured without the client's. Workers process a mix of
 * 6300×6300 progressive CMYK JPEGs (about 1 MB each) and ordinary 800×600 ones at
 * WORKER_CONCURRENCY, while 8 clients send lens requests (a 4000×4000 progressive CMYK JPEG as a
 * data URI, under the 500 KB body limit) in a loop. VmRSS is sampled every 50 ms, and the
 * kernel's high-water mark (VmHWM, reset after the idle reading) catches a peak between samples.
 *
 *   npm run bench:memory   (WORKER_CONCURRENCY, BENCH_MEMORY_BIG, BENCH_MEMORY_BIG_SIDE, BENCH_MEMORY_NORMAL,
 *                           BENCH_MEMORY_AS: the key of bench/results/memory.json this run
 *                           fills, `after` by default; other keys are kept, so runs of the code
 *                           before and after a change, or with other malloc settings, sit side
 *                           by side)
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { LIMITS } from 'visual-search-service/dist/domain/limits';
import {
  RESULTS_DIR,
  call,
  createDataset,
  deleteInstallation,
  machine,
  startService,
  summarize,
  writeResult,
} from './common';

const CONCURRENCY = process.env.WORKER_CONCURRENCY ?? '8';
const BIG = Number(process.env.BENCH_MEMORY_BIG ?? 24);
const NORMAL = Number(process.env.BENCH_MEMORY_NORMAL ?? 24);
const LABEL = process.env.BENCH_MEMORY_AS ?? 'after';
const LENS_CLIENTS = 8;
const SAMPLE_MS = 50;
const BIG_SIDE = Number(process.env.BENCH_MEMORY_BIG_SIDE ?? 6300);
const LENS_SIDE = 4000;
const DS = '/orgs/bench/datasets/memory';

interface Service {
  url: string;
  orgToken: string;
  dsToken: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kb: number) => Math.round(kb / 1024);

/**
 * One flat colour: the JPEG holds almost nothing per block, yet decodes to side² pixels. Made
 * CMYK at 8×8 and enlarged in CMYK, because converting 40 MP to CMYK takes seconds.
 */
async function flatCmyk(side: number, background: { r: number; g: number; b: number }) {
  const seed = await sharp({ create: { width: 8, height: 8, channels: 3, background } })
    .toColourspace('cmyk')
    .jpeg()
    .toBuffer();
  return sharp(seed)
    .pipelineColourspace('cmyk')
    .resize(side, side, { kernel: 'nearest' })
    .toColourspace('cmyk')
    .jpeg({ progressive: true, quality: 80 })
    .toBuffer();
}

const ordinary = (i: number) =>
  sharp({
    create: { width: 800, height: 600, channels: 3, background: { r: i * 30, g: 90, b: 200 } },
  })
    .composite([
      {
        input: Buffer.from(
          `<svg width="800" height="600"><circle cx="${150 + i * 60}" cy="300" r="120" fill="white"/></svg>`,
        ),
      },
    ])
    .jpeg({ quality: 85 })
    .toBuffer();

async function imageServer(files: Map<string, Buffer>): Promise<{ url: string; close(): void }> {
  const server = http.createServer((req, res) => {
    const bytes = files.get(req.url ?? '');
    res.writeHead(bytes ? 200 : 404, { 'content-type': 'image/jpeg' });
    res.end(bytes);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => server.close(),
  };
}

/** The child: the service as `npm start` runs it (api and worker roles), on a fresh dataset. */
async function serve(): Promise<void> {
  const app = await startService({
    IMAGE_FETCH_ALLOW_PRIVATE: 'true',
    WORKER_CONCURRENCY: CONCURRENCY,
  });
  const { orgToken, dsToken } = await createDataset(app, 'memory');
  process.send!({ url: app.url!, orgToken, dsToken } satisfies Service);
  process.once('message', () => {
    void app
      .stop()
      .then(() => deleteInstallation(app.container.config))
      .finally(() => process.exit(0));
  });
}

function startChild(): Promise<{ child: ChildProcess; service: Service }> {
  const child = fork(__filename, ['serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (service) => resolve({ child, service: service as Service }));
    child.once('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
}

function statusKb(pid: number, key: 'VmRSS' | 'VmHWM'): number {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
}

async function push(s: Service, content: Array<{ id: string; url: string }>): Promise<void> {
  const r = await call(s.url, 'POST', `${DS}/content`, s.orgToken, { content });
  if (r.status !== 202) throw new Error(`POST content: ${r.status} ${JSON.stringify(r.body)}`);
}

/** Until n items are processed; a processing error ends the run. */
async function waitProcessed(s: Service, n: number): Promise<void> {
  for (;;) {
    const c = (await call(s.url, 'GET', DS, s.orgToken)).body.dataset.counts;
    if (c.errors > 0) throw new Error(`processing errors: ${JSON.stringify(c)}`);
    if (c.processed + c.errors >= n) return;
    await sleep(200);
  }
}

async function measure(images: string, s: Service, pid: number, lensBody: { image: string }) {
  const ready = LIMITS.minProcessedForVision;
  await push(
    s,
    Array.from({ length: ready }, (_, i) => ({ id: `ready-${i}`, url: `${images}/n${i % 8}` })),
  );
  await waitProcessed(s, ready);
  await sleep(3000);
  const idle: number[] = [];
  for (let i = 0; i < 40; i++) {
    idle.push(statusKb(pid, 'VmRSS'));
    await sleep(SAMPLE_MS);
  }
  const idleKb = idle.sort((a, b) => a - b)[idle.length >> 1]!;
  // 5 resets VmHWM to the current RSS (proc(5), clear_refs): from here it is the load's peak.
  fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');

  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(statusKb(pid, 'VmRSS')), SAMPLE_MS);
  let done = false;
  const statuses: Record<number, number> = {};
  const lensMs: number[] = [];
  const lens = Array.from({ length: LENS_CLIENTS }, async () => {
    while (!done) {
      const t = Date.now();
      // a refused connection is counted, not thrown: it would end this process before the
      // error that stopped the run is reported
      const r = await call(s.url, 'POST', `${DS}/search`, s.dsToken, lensBody).catch(() => ({
        status: 0,
      }));
      lensMs.push(Date.now() - t);
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
  });
  const start = Date.now();
  // interleaved, so big and ordinary images are in flight together
  const mix = Array.from({ length: BIG + NORMAL }, (_, i) =>
    i % 2 === 0 && i / 2 < BIG
      ? { id: `big-${i}`, url: `${images}/big` }
      : { id: `normal-${i}`, url: `${images}/n${i % 8}` },
  );
  await push(s, mix);
  // Every image is processed: progressive JPEGs too large to decode whole are read from their
  // DC scans (src/adapters/images/jpeg-dc.ts), so none is refused for its decode's size.
  await waitProcessed(s, ready + mix.length);
  done = true;
  await Promise.all(lens);
  const seconds = (Date.now() - start) / 1000;
  clearInterval(sampler);
  const hwmKb = statusKb(pid, 'VmHWM');
  const peakKb = Math.max(hwmKb, ...samples);
  const details = await call(
    s.url,
    'GET',
    `${DS}/content/details?ids=big-0&fields=image_width,image_height`,
    s.dsToken,
  );
  const errors = await call(s.url, 'GET', `${DS}/errors?limit=1000`, s.orgToken);
  const refused: Record<string, number> = {};
  for (const e of errors.body.errors as Array<{ code: string }>)
    refused[e.code] = (refused[e.code] ?? 0) + 1;
  return {
    date: new Date().toISOString(),
    idle_rss_mib: mib(idleKb),
    peak_rss_mib: mib(peakKb),
    peak_minus_idle_mib: mib(peakKb - idleKb),
    peak_sampled_rss_mib: mib(Math.max(...samples)),
    kernel_high_water_mib: mib(hwmKb),
    rss_samples: samples.length,
    load_seconds: Math.round(seconds * 10) / 10,
    // timings are only comparable on a quiet machine
    machine_load_average_1m: Math.round(os.loadavg()[0]! * 10) / 10,
    lens_requests_by_status: statuses,
    lens_latency_ms: summarize(lensMs),
    big_item_as_stored: details.body.results?.[0],
    processing_errors_by_code: refused,
    big_item_error: (errors.body.errors as Array<{ id: string; message: string }>).find(
      (e) => e.id === 'big-0',
    )?.message,
  };
}

async function main(): Promise<void> {
  const big = await flatCmyk(BIG_SIDE, { r: 200, g: 60, b: 30 });
  const lensJpeg = await flatCmyk(LENS_SIDE, { r: 30, g: 120, b: 200 });
  const lensBody = { image: `data:image/jpeg;base64,${lensJpeg.toString('base64')}` };
  const bodyBytes = JSON.stringify(lensBody).length;
  if (bodyBytes > LIMITS.lensBodyBytes) throw new Error(`lens body is ${bodyBytes} bytes`);
  const files = new Map([['/big', big]]);
  for (let i = 0; i < 8; i++) files.set(`/n${i}`, await ordinary(i));
  const img = await imageServer(files);
  const { child, service } = await startChild();
  let run;
  try {
    run = await measure(img.url, service, child.pid!, lensBody);
  } finally {
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    img.close();
  }
  const file = path.join(RESULTS_DIR, 'memory.json');
  const previous = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  const settings = {
    worker_concurrency: Number(CONCURRENCY),
    big_items: BIG,
    big_image: { width: BIG_SIDE, height: BIG_SIDE, bytes: big.length, kind: 'progressive CMYK' },
    normal_items: NORMAL,
    normal_image: { width: 800, height: 600, kind: 'baseline sRGB' },
    ready_items_before_load: LIMITS.minProcessedForVision,
    lens_clients: LENS_CLIENTS,
    lens_image: {
      width: LENS_SIDE,
      height: LENS_SIDE,
      bytes: lensJpeg.length,
      body_bytes: bodyBytes,
    },
    rss_sample_ms: SAMPLE_MS,
    libvips: sharp.versions.vips,
    // glibc reads these at start only; the service inherits them from this process
    malloc_env: Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => k.startsWith('MALLOC_') || k === 'GLIBC_TUNABLES' || k === 'LD_PRELOAD',
      ),
    ),
  };
  // earlier runs keep their keys; the header is this run's
  const { before, after, benchmark: _b, goal: _g, machine: _m, note: _n, ...others } = previous;
  const out = writeResult('memory', {
    benchmark: 'memory',
    goal: 'peak_minus_idle <= 300 MB (286 MiB)',
    machine: { ...machine(), memory_mib: Math.round(os.totalmem() / 2 ** 20) },
    note: 'service in a child process (api + worker roles, embedded engine), RSS of that process only; idle is the median over 2 s, 3 s after the 200 ready items were processed',
    before,
    after,
    ...others,
    [LABEL]: { settings, ...run },
  });
  process.stderr.write(`${JSON.stringify(run)}\n`);
  process.stdout.write(`written to ${out}\n`);
}

(process.argv[2] === 'serve' ? serve() : main()).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
