import type { ChildProcess } from 'node:child_process';
import { OPERATOR, tempDir, waitFor } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { buildDist, freePort, httpClient, spawnService } from '../helpers/processes';

let img: ImageServer;
let child: ChildProcess | undefined;

const spawnServer = (dataDir: string, port: number): ChildProcess =>
  spawnService(dataDir, 'server', { PORT: String(port), WORKER_CONCURRENCY: '2' });

beforeAll(async () => {
  buildDist();
  img = await startImageServer();
}, 120_000);
afterAll(async () => {
  child?.kill('SIGKILL');
  await img.close();
});

it('every write that got 202 survives SIGKILL, and its image is processed after restart', async () => {
  const dataDir = tempDir('vss-kill-');
  const port = await freePort();
  const { call, up } = httpClient(port);

  child = spawnServer(dataDir, port);
  await up();
  const org = await call('POST', '/orgs', OPERATOR, { name: 'acme' });
  const orgToken = org.body.token as string;
  await call('POST', '/orgs/acme/datasets', orgToken, { name: 'd' });
  const acked: string[] = [];

  // Three crash cycles: writes stream in while slow images are being processed, then SIGKILL.
  for (let cycle = 0; cycle < 3; cycle++) {
    let writing = true;
    const writer = (async () => {
      // Paced and capped so the backlog left to process stays small (a few hundred images).
      for (let b = 0; writing && b < 15; b++) {
        const ids = Array.from({ length: 10 }, (_, i) => `c${cycle}-b${b}-${i}`);
        try {
          const r = await call('POST', '/orgs/acme/datasets/d/content', orgToken, {
            content: ids.map((id, i) => ({ id, url: `${img.url}/delayed/${i}.png?ms=20` })),
          });
          if (r.status === 202) acked.push(...ids);
          await new Promise((r) => setTimeout(r, 25));
        } catch {
          return; // the server died mid-request: that batch was never acknowledged
        }
      }
    })();
    await new Promise((r) => setTimeout(r, 400 + cycle * 150));
    const dying = child;
    const exited = new Promise((r) => dying.once('exit', r));
    dying.kill('SIGKILL');
    writing = false;
    await writer;
    await exited;
    child = spawnServer(dataDir, port);
    await up();
  }

  expect(acked.length).toBeGreaterThan(30);
  const listed = new Map<string, boolean>();
  for (let offset = 0; ; offset += 1000) {
    const r = await call('GET', `/orgs/acme/datasets/d/content?offset=${offset}`, orgToken);
    for (const e of r.body.content) listed.set(e.id, e.processed);
    if (r.body.content.length < 1000) break;
  }
  for (const id of acked) expect(listed.has(id)).toBe(true);

  await waitFor(
    'every acknowledged item processed',
    async () => {
      const r = await call('GET', '/orgs/acme/datasets/d', orgToken);
      return r.body.dataset.counts.pending === 0 && r.body.dataset.counts.errors === 0;
    },
    90_000,
  );
  const d = await call('GET', '/orgs/acme/datasets/d', orgToken);
  expect(d.body.dataset.counts.processed).toBe(d.body.dataset.counts.items);
  expect(d.body.dataset.counts.items).toBeGreaterThanOrEqual(acked.length);

  const last = child;
  const code = new Promise((r) => last.once('exit', r));
  last.kill('SIGTERM');
  expect(await code).toBe(0);
  child = undefined;
}, 180_000);
