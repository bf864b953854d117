import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { buildSync } from 'esbuild';
import { main } from '../../src/cli/import/main';
import { setupDataset, startTestApp, tempDir, waitFor, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { ROOT } from '../helpers/processes';

/**
 * The import tool against a real service. The 10,000-line catalogue goes to an API-only
 * installation (nothing processes the images, so the figures measure the import itself);
 * the server-side item count is what proves that every good line arrived.
 */

const LINES = 10_000;

type Kind = 'good' | 'bad-json' | 'no-url' | 'nested' | 'gif';

function kindOf(i: number): Kind {
  if (i % 487 === 100) return 'bad-json';
  if (i % 691 === 200) return 'no-url';
  if (i % 853 === 300) return 'nested'; // the server refuses nested metadata objects
  if (i % 1499 === 400) return 'gif'; // …and urls of other image formats
  return 'good';
}

const id = (i: number) => `sku-${String(i).padStart(5, '0')}`;

function catalogueLine(i: number, imageUrl: string): string {
  const url = `${imageUrl}/img/${i % 50}.png`;
  switch (kindOf(i)) {
    case 'bad-json':
      return `{"id":"${id(i)}","url":"${url}",`;
    case 'no-url':
      return JSON.stringify({ id: id(i), metadata: { price: i } });
    case 'nested':
      return JSON.stringify({ id: id(i), url, metadata: { dims: { w: 1, h: 2 } } });
    case 'gif':
      return JSON.stringify({ id: id(i), url: `${imageUrl}/img/${i}.gif` });
    default:
      // both JSON Lines shapes: a metadata object, or metadata as top-level keys
      return i % 2
        ? JSON.stringify({
            id: id(i),
            url,
            metadata: { price: i / 10, tags: ['a', `t${i % 7}`], instock: i % 3 === 0 },
          })
        : JSON.stringify({ id: id(i), url, name: `item «${i}»`, price: i });
  }
}

const expected = {
  good: [] as string[],
  bad: new Map<number, Kind>(), // line number → kind
};
for (let i = 0; i < LINES; i++) {
  if (kindOf(i) === 'good') expected.good.push(id(i));
  else expected.bad.set(i + 1, kindOf(i));
}

let api: TestApp;
let images: ImageServer;
let dir: string;
let file: string;
let cli: string;
let orgToken: string;

/** A new dataset of organisation acme. */
async function dataset(name: string): Promise<{ dsToken: string; base: string }> {
  const d = await api.call('POST', '/orgs/acme/datasets', { token: orgToken, body: { name } });
  expect(d.status).toBe(201);
  return { dsToken: d.body.dataset.browse_token, base: `/orgs/acme/datasets/${name}` };
}

beforeAll(async () => {
  images = await startImageServer();
  api = await startTestApp({ APP_ROLES: 'api' });
  ({ orgToken } = await setupDataset(api, 'acme', 'first'));
  dir = tempDir('vss-import-');
  file = path.join(dir, 'catalogue.jsonl');
  const out = fs.createWriteStream(file);
  for (let i = 0; i < LINES; i++) out.write(`${catalogueLine(i, images.url)}\n`);
  await new Promise((r) => out.end(r));
  // The command as a process (for SIGKILL), bundled from the same sources in ~0.2 s, where a
  // full `tsc` build of dist/ would take ~20 s: the same code `npm run import` compiles.
  cli = path.join(dir, 'import-cli.js');
  buildSync({
    entryPoints: [path.join(ROOT, 'src/cli/import/main.ts')],
    bundle: true,
    platform: 'node',
    target: 'node20',
    outfile: cli,
    logLevel: 'warning',
  });
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await images?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the tool in this process; returns its exit code and output. */
async function runMain(args: string[], token: string, signal?: AbortSignal) {
  let stdout = '';
  let stderr = '';
  const o = new PassThrough().on('data', (d) => (stdout += d));
  const e = new PassThrough().on('data', (d) => (stderr += d));
  const code = await main(args, {
    env: { IMPORT_TOKEN: token },
    stdout: o,
    stderr: e,
    tty: false,
    progressIntervalMs: 1000,
    ...(signal ? { signal } : {}),
  });
  return { code, stdout, stderr };
}

async function serverIds(t: TestApp, base: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  for (let offset = 0; ; offset += 1000) {
    const r = await t.call('GET', `${base}/content?limit=1000&offset=${offset}`, { token });
    expect(r.status).toBe(200);
    ids.push(...r.body.content.map((c: { id: string }) => c.id));
    if (r.body.content.length < 1000) return ids;
  }
}

const readJsonl = (f: string) =>
  fs
    .readFileSync(f, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

/** Checks the rejected-lines file: every bad line exactly once, with its reason. */
function checkRejected(f: string): void {
  const rejected = readJsonl(f);
  expect(rejected.map((r) => r.line)).toEqual([...expected.bad.keys()]);
  for (const r of rejected) {
    const kind = expected.bad.get(r.line);
    if (kind === 'bad-json')
      expect(r).toMatchObject({ by: 'local', reason: expect.stringMatching(/^invalid JSON: /) });
    if (kind === 'no-url') expect(r).toMatchObject({ by: 'local', reason: 'missing url' });
    if (kind === 'nested')
      expect(r).toMatchObject({
        by: 'server',
        field: 'metadata.dims',
        reason: expect.stringMatching(/\w/), // the server's words
      });
    if (kind === 'gif')
      expect(r).toMatchObject({
        by: 'server',
        field: 'url',
        reason: expect.stringMatching(/gif/),
      });
    if (kind !== 'bad-json') expect(r.id).toBe(id(r.line - 1));
  }
}

/**
 * A small HTTP proxy in front of the service that can answer a chosen status instead (429,
 * 503 with Retry-After) and slow answers down, recording what it saw.
 */
interface FaultProxy {
  url: string;
  seen: Array<{ n: number; status: number }>;
  /** POSTs received so far. */
  posts(): number;
  fault: (n: number) => { status: number; retryAfter?: string } | undefined;
  delayMs: number;
  close(): Promise<void>;
}

async function startFaultProxy(target: string): Promise<FaultProxy> {
  let posts = 0;
  const proxy: FaultProxy = {
    url: '',
    seen: [],
    posts: () => posts,
    fault: () => undefined,
    delayMs: 0,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server = http.createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const n = req.method === 'POST' ? posts++ : -1;
      const f = n >= 0 ? proxy.fault(n) : undefined;
      if (f) {
        proxy.seen.push({ n, status: f.status });
        res.writeHead(f.status, {
          'content-type': 'application/json',
          ...(f.retryAfter ? { 'retry-after': f.retryAfter } : {}),
        });
        return res.end(
          JSON.stringify({
            status: 'error',
            error: { code: 'x', message: `injected ${f.status}` },
          }),
        );
      }
      if (proxy.delayMs) await new Promise((r) => setTimeout(r, proxy.delayMs));
      const headers: Record<string, string> = {};
      for (const h of ['authorization', 'accept', 'content-type'])
        if (req.headers[h]) headers[h] = String(req.headers[h]);
      try {
        const r = await fetch(target + req.url, {
          method: req.method,
          headers,
          body: chunks.length ? Buffer.concat(chunks) : undefined,
        });
        const body = Buffer.from(await r.arrayBuffer());
        if (n >= 0) proxy.seen.push({ n, status: r.status });
        res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'text/plain' });
        res.end(body);
      } catch {
        res.destroy();
      }
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}

const args = (url: string, ds: string, f: string, ...more: string[]) => [
  '--org',
  'acme',
  '--dataset',
  ds,
  '--url',
  url,
  ...more,
  f,
];

it('imports 10,000 lines: every good line accepted, every bad one reported with its line and reason', async () => {
  const { base } = await dataset('big');
  const r = await runMain(args(api.url, 'big', file), orgToken);
  expect(r.stderr).toMatch(/import: \d+% .* accepted, .* items\/s/); // the non-TTY progress line
  expect(r.code).toBe(2); // some lines were rejected
  const rate = /\(([\d,]+) items\/s\)/.exec(r.stdout)?.[1];
  console.log(`import of ${LINES} lines: ${rate} items/s\n${r.stdout}`);
  const fmt = (n: number) => n.toLocaleString('en-US');
  expect(r.stdout).toContain(`accepted: ${fmt(expected.good.length)}\n`);
  expect(r.stdout).toContain(`rejected: ${fmt(expected.bad.size)}\n`);
  expect(r.stdout).toMatch(/line 101: invalid JSON/); // the first rejections are listed
  // without --wait, a snapshot of processing (this installation has no worker: all pending)
  const good = fmt(expected.good.length);
  expect(r.stdout).toContain(
    `processed: 0 of ${good} items in the dataset so far, 0 with processing errors, ${good} pending\n`,
  );
  expect(r.stdout).toContain('--wait waits until none is pending');
  checkRejected(`${file}.rejected.jsonl`);

  const state = JSON.parse(fs.readFileSync(`${file}.import-state.json`, 'utf8'));
  expect(state).toMatchObject({
    done: true,
    offset: fs.statSync(file).size,
    line: LINES + 1,
    accepted: expected.good.length,
    rejected: expected.bad.size,
  });
  const counts = (await api.call('GET', base, { token: orgToken })).body.dataset.counts;
  expect(counts.items).toBe(expected.good.length);
  expect(await serverIds(api, base, orgToken)).toEqual(expected.good);

  // run again: the state says done, so nothing is sent and the totals stand
  const again = await runMain(args(api.url, 'big', file), orgToken);
  expect(again.code).toBe(2);
  expect(again.stdout).toContain(`accepted: ${fmt(expected.good.length)} (0 in this run)`);
  expect(readJsonl(`${file}.rejected.jsonl`)).toHaveLength(expected.bad.size);
});

it('resumes after a SIGKILL and a server that answers 503 for a while: no line lost, none counted twice', async () => {
  const { base } = await dataset('resume');
  const proxy = await startFaultProxy(api.url);
  try {
    const state = path.join(dir, 'resume.state.json');
    const rejected = path.join(dir, 'resume.rejected.jsonl');
    const common = ['--state', state, '--rejected', rejected, '--batch-items', '100'];
    proxy.delayMs = 15;
    const child = spawn(process.execPath, [cli, ...args(proxy.url, 'resume', file, ...common)], {
      env: { PATH: process.env.PATH, IMPORT_TOKEN: orgToken },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    // kill it hard once a good part, but not all, is acknowledged
    const readState = () => {
      try {
        return JSON.parse(fs.readFileSync(state, 'utf8'));
      } catch {
        return undefined;
      }
    };
    const killedAt = await waitFor('a third of the lines acknowledged', async () => {
      const s = readState();
      return s && s.line > LINES / 3 && s;
    });
    child.kill('SIGKILL');
    await exited;
    const after = readState();
    expect(after.done).toBe(false);
    expect(after.line).toBeGreaterThanOrEqual(killedAt.line);
    expect(after.line).toBeLessThan(LINES);
    const stored = (await api.call('GET', base, { token: orgToken })).body.dataset.counts.items;
    expect(stored).toBeGreaterThanOrEqual(after.accepted); // what was in flight may be there too

    // the service is unavailable for the first requests of the second run, then comes back
    proxy.delayMs = 0;
    const from = proxy.posts();
    proxy.fault = (n) => (n < from + 3 ? { status: 503, retryAfter: '1' } : undefined);
    const r = await runMain(args(proxy.url, 'resume', file, ...common), orgToken);
    expect(r.code).toBe(2);
    // the wait it chose honours Retry-After (the delay rule itself: import-batching.test.ts)
    expect(r.stderr).toMatch(/HTTP 503 \(injected 503\); retry 1 in 1\.\d s/);
    expect(r.stdout).toContain(`resumed at line ${after.line.toLocaleString('en-US')}`);
    // the first three requests were refused, and the batches they carried were sent again
    const seen = proxy.seen.filter((s) => s.n >= from);
    expect(seen.slice(0, 3).map((s) => s.status)).toEqual([503, 503, 503]);

    const final = readState();
    expect(final).toMatchObject({
      done: true,
      accepted: expected.good.length,
      rejected: expected.bad.size,
    });
    checkRejected(rejected); // lines rejected before the kill are not listed twice
    expect(await serverIds(api, base, orgToken)).toEqual(expected.good);
  } finally {
    await proxy.close();
  }
});

it('honours 429 Retry-After and stops at once on a refused token or an unknown dataset', async () => {
  const { dsToken, base } = await dataset('small');
  const small = path.join(dir, 'small.jsonl');
  fs.writeFileSync(
    small,
    Array.from({ length: 50 }, (_, i) => catalogueLine(2 * i, images.url)).join('\n'),
  );
  const proxy = await startFaultProxy(api.url);
  try {
    proxy.fault = (n) => (n < 2 ? { status: 429, retryAfter: '1' } : undefined);
    const r = await runMain(args(proxy.url, 'small', small, '--batch-items', '20'), orgToken);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('accepted: 50\n');
    expect(r.stdout).toContain('processed: 0 of 50 items in the dataset so far');
    expect(r.stderr).toMatch(/HTTP 429 .*retry 1 in 1\.\d s/);
    // each of the first two batches was refused once, then sent again after the wait the CLI
    // reported above (the delay rule itself: import-batching.test.ts)
    const statuses = proxy.seen.map((s) => s.status);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    expect(statuses.filter((s) => s === 202)).toHaveLength(3);
    expect(proxy.seen.filter((s) => s.n >= 3)).toHaveLength(2);
    expect((await api.call('GET', base, { token: orgToken })).body.dataset.counts.items).toBe(50);
  } finally {
    await proxy.close();
  }

  const fatal = async (token: string, ds: string, message: RegExp) => {
    const r = await runMain(args(api.url, ds, small, '--restart'), token);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(message);
    expect(r.stdout).not.toContain('processed:'); // nothing to read the counts of
  };
  await fatal('org_not-a-real-token', 'small', /answered 401: the token was refused/);
  await fatal(dsToken, 'small', /answered 403: this token may not write content/);
  await fatal(orgToken, 'no-such-dataset', /answered 404: .*not found/);

  const usage = await runMain(['--org', 'acme', small], orgToken);
  expect(usage.code).toBe(1);
  expect(usage.stderr).toContain('--dataset is required');
});

it('imports a CSV with quoted fields, inferred and declared types, and waits for processing', async () => {
  const full = await startTestApp();
  try {
    const { orgToken: token, dsToken, base } = await setupDataset(full, 'acme', 'csv');
    const csv = path.join(dir, 'catalogue.csv');
    const rows = [
      'id,url,name,price,instock,tags,code',
      `c1,${images.url}/img/1.png,"Boots, brown",12.5,true,a|b,007`,
      `c2,${images.url}/img/2.png,"say ""hi""\non two lines",3,false,c,42`,
      `c3,${images.url}/img/3.png,plain,,,,`,
      `c4,,no url,1,true,x,1`,
      `c5,${images.url}/img/5.png,too,many,fields,here,1,2`,
    ];
    fs.writeFileSync(csv, `${rows.join('\r\n')}\r\n`);
    const r = await runMain(
      args(full.url, 'csv', csv, '--types', 'tags=array,code=string', '--wait'),
      token,
    );
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('accepted: 3\n');
    expect(r.stdout).toContain(
      'processed: 3 of 3 items in the dataset, 0 with processing errors\n',
    );
    expect(r.stdout).not.toContain('so far');
    expect(readJsonl(`${csv}.rejected.jsonl`)).toEqual([
      // physical line numbers: c2's name spans two lines
      { line: 6, id: 'c4', reason: 'missing url', by: 'local' },
      { line: 7, reason: 'row has 8 fields; the header has 7', by: 'local' },
    ]);
    const details = await full.call('GET', `${base}/content/details?ids=c1,c2,c3&fields=*`, {
      token: dsToken,
    });
    const meta = Object.fromEntries(
      details.body.results.map((x: { id: string; metadata: object }) => [x.id, x.metadata]),
    );
    expect(meta.c1).toMatchObject({
      name: 'Boots, brown',
      price: 12.5,
      instock: true,
      tags: ['a', 'b'],
      code: '007',
    });
    expect(meta.c2).toMatchObject({ name: 'say "hi"\non two lines', price: 3, instock: false });
    // empty cells are absent fields
    expect(Object.keys(meta.c3).filter((k) => !/^(image|service)_/.test(k))).toEqual(['name']);
  } finally {
    await full.stop();
  }
});
