/**
 * GET /metrics (contract §12) on whichever engine the project runs: every metric the contract
 * names, labels by route template and operation, never a token, organisation or dataset name.
 */
import { AppError } from '../../src/domain/errors';
import {
  OPERATOR,
  setupDataset,
  startTestApp,
  waitFor,
  waitProcessed,
  type TestApp,
} from '../helpers/app';
import { gql } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
const N = 12;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp();
  ds = await setupDataset(t, 'metricsorg', 'secretds');
  const content = Array.from({ length: N }, (_, i) => ({
    id: `m${i}`,
    url: `${img.url}/img/${i}.png`,
  }));
  content.push({ id: 'gone', url: `${img.url}/missing.png` });
  await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  await waitProcessed(t, ds.base, ds.orgToken, N + 1, 60_000);
  await t.call('GET', `${ds.base}/content?limit=5`, { token: ds.orgToken });
  // a search-engine call that needs no 200 processed items (facet counts)
  expect(
    (await t.call('GET', `${ds.base}/content/fields?fields=colour`, { token: ds.dsToken })).status,
  ).toBe(200);
  await gql(t.url, 'query Overview { viewer { kind } }', {}, ds.orgToken);
}, 120_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

/** The text of every process of the installation (API hosts and workers). */
async function scrapeAll(hosts = t.hosts): Promise<string[]> {
  return Promise.all(
    hosts.map(async (h) => {
      const r = await fetch(`${h.healthUrl}/metrics`, {
        headers: { authorization: `token ${OPERATOR}` },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return r.text();
    }),
  );
}

test('every metric of contract §12 is exposed, with template labels only', async () => {
  const texts = await scrapeAll();
  const all = texts.join('\n');
  for (const name of [
    'http_request_duration_seconds_bucket',
    'graphql_operation_duration_seconds_bucket',
    'image_jobs_total',
    'image_job_duration_seconds_bucket',
    'queue_depth',
    'queue_oldest_job_age_seconds',
    'search_engine_request_duration_seconds_bucket',
    'image_fetch_bytes_total',
    'process_cpu_seconds_total',
    'nodejs_heap_size_used_bytes',
  ])
    expect([name, all.includes(`\n${name}`)]).toEqual([name, true]);
  expect(all).toMatch(
    /http_request_duration_seconds_count\{method="GET",route="\/orgs\/:organisation\/datasets\/:dataset\/content",status="200"\} [1-9]/,
  );
  expect(all).toMatch(/graphql_operation_duration_seconds_count\{operation="Overview"\} [1-9]/);
  const sum = (re: RegExp) => [...all.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  expect(sum(/image_jobs_total\{outcome="processed"\} (\d+)/g)).toBe(N);
  expect(sum(/image_jobs_total\{outcome="failed"\} (\d+)/g)).toBe(1);
  expect(sum(/image_fetch_bytes_total (\d+)/g)).toBeGreaterThan(N * 50);
  expect(all).toMatch(/queue_depth\{state="ready"\} 0/);
  expect(all).toMatch(/search_engine_request_duration_seconds_count\{operation="facets"\} [1-9]/);
  // nothing that names a tenant or carries a secret
  for (const secret of ['metricsorg', 'secretds', ds.orgToken, ds.dsToken, OPERATOR, 'm1"'])
    expect([secret, all.includes(secret)]).toEqual([secret, false]);
});

test('while the store is down the workers pause and the oldest job age climbs, then falls to 0', async () => {
  const workers = t.hosts.filter((h) => h.container.config.APP_ROLES.has('worker'));
  const down = new AppError('unavailable', 'the store is unreachable', undefined, 5);
  // The worker reads the item first, and probes the store before it takes jobs again.
  const reads = workers.map((h) =>
    jest.spyOn(h.container.ports.content, 'getItems').mockRejectedValue(down),
  );
  const probes = workers.map((h) =>
    jest.spyOn(h.container.ports.content, 'ping').mockRejectedValue(down),
  );
  /** Each worker's oldest job age in ms, and the installation's clock around the scrape. */
  const scrape = async () => {
    const from = t.clock.now();
    const texts = await scrapeAll(workers);
    const ages = texts.map((text) =>
      Math.round(Number(/^queue_oldest_job_age_seconds (\S+)$/m.exec(text)?.[1]) * 1000),
    );
    // the three jobs back in the queue, none taken, on every worker's read
    const waiting = texts.every(
      (text) =>
        /^queue_depth\{state="ready"\} 3$/m.test(text) &&
        /^queue_depth\{state="running"\} 0$/m.test(text),
    );
    return { from, to: t.clock.now(), ages, waiting };
  };
  try {
    const before = t.clock.now();
    const content = [0, 1, 2].map((i) => ({ id: `wait${i}`, url: `${img.url}/img/${40 + i}.png` }));
    const posted = await t.call('POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content },
    });
    expect(posted.status).toBe(202);
    const enqueued = t.clock.now();
    // Every worker takes a job (or one another put back), finds the store down and pauses, and
    // its probe of the store is refused: the jobs are all back in the queue, and each worker
    // knows since when they wait.
    const called = (spies: jest.SpyInstance[]) => spies.every((s) => s.mock.calls.length > 0);
    await waitFor('every worker paused with the jobs waiting', async () => {
      if (!called(reads) || !called(probes)) return false;
      const s = await scrape();
      return s.waiting && s.ages.every((age) => Number.isFinite(age));
    });
    // The clock jumps a minute, twice. A scrape then shows a queue read made since (metrics.ts
    // reuses one for a second of that clock), so each age is exactly that read's time less when
    // the oldest job was enqueued: within the bounds the clock readings around it give.
    const STEP_MS = 60_000;
    const seen: number[][] = [];
    for (let i = 0; i < 2; i++) {
      t.clock.advance(STEP_MS);
      const { from, to, ages, waiting } = await scrape();
      for (const age of ages) {
        expect(age).toBeGreaterThanOrEqual(from - enqueued);
        expect(age).toBeLessThanOrEqual(to - before);
      }
      // still paused: nothing was taken again
      expect(waiting).toBe(true);
      seen.push(ages);
    }
    seen[1]!.forEach((age, w) => expect(age - seen[0]![w]!).toBeGreaterThanOrEqual(STEP_MS));
  } finally {
    for (const s of [...reads, ...probes]) s.mockRestore();
  }
  await waitProcessed(t, ds.base, ds.orgToken, N + 4, 60_000);
  await waitFor('the age back at 0', async () => (await scrape()).ages.every((a) => a === 0));
}, 90_000);

test('/metrics needs the operator token', async () => {
  const h = t.hosts[0]!;
  expect((await fetch(`${h.healthUrl}/metrics`)).status).toBe(401);
  const org = await fetch(`${h.healthUrl}/metrics`, {
    headers: { authorization: `token ${ds.orgToken}` },
  });
  expect(org.status).toBe(403);
});
