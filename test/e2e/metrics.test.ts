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
  const spies = workers.flatMap((h) => [
    jest.spyOn(h.container.ports.content, 'getItems').mockRejectedValue(down),
    jest.spyOn(h.container.ports.content, 'ping').mockRejectedValue(down),
  ]);
  const ages = async (): Promise<number[]> =>
    (await scrapeAll(workers)).map((text) =>
      Number(/^queue_oldest_job_age_seconds (\S+)$/m.exec(text)?.[1]),
    );
  try {
    const before = Date.now();
    const content = [0, 1, 2].map((i) => ({ id: `wait${i}`, url: `${img.url}/img/${40 + i}.png` }));
    const posted = await t.call('POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content },
    });
    expect(posted.status).toBe(202);
    const enqueued = Date.now();
    // Every worker takes a job (or one another put back), finds the store down and pauses.
    await waitFor('every worker paused with the jobs waiting', async () =>
      (await ages()).every((a) => a >= 1),
    );
    const seen: number[][] = [];
    for (let i = 0; i < 2; i++) {
      if (i) await new Promise((r) => setTimeout(r, 1200));
      // a scrape may show a queue read up to 1 s old (metrics.ts reads once per second)
      const from = Date.now() - 1000;
      seen.push(await ages());
      for (const age of seen[i]!) {
        expect(age).toBeGreaterThanOrEqual((from - enqueued) / 1000);
        expect(age).toBeLessThanOrEqual((Date.now() - before) / 1000);
      }
    }
    seen[1]!.forEach((age, w) => expect(age - seen[0]![w]!).toBeGreaterThanOrEqual(1));
    expect((await scrapeAll(workers)).join('\n')).toMatch(/queue_depth\{state="ready"\} 3\n/);
  } finally {
    for (const s of spies) s.mockRestore();
  }
  await waitProcessed(t, ds.base, ds.orgToken, N + 4, 60_000);
  await waitFor('the age back at 0', async () => (await ages()).every((a) => a === 0));
}, 90_000);

test('/metrics needs the operator token', async () => {
  const h = t.hosts[0]!;
  expect((await fetch(`${h.healthUrl}/metrics`)).status).toBe(401);
  const org = await fetch(`${h.healthUrl}/metrics`, {
    headers: { authorization: `token ${ds.orgToken}` },
  });
  expect(org.status).toBe(403);
});
