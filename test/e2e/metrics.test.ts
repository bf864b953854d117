/**
 * GET /metrics (contract §12) on whichever engine the project runs: every metric the contract
 * names, labels by route template and operation, never a token, organisation or dataset name.
 */
import { OPERATOR, setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
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
async function scrapeAll(): Promise<string[]> {
  return Promise.all(
    t.hosts.map(async (h) => {
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

test('/metrics needs the operator token', async () => {
  const h = t.hosts[0]!;
  expect((await fetch(`${h.healthUrl}/metrics`)).status).toBe(401);
  const org = await fetch(`${h.healthUrl}/metrics`, {
    headers: { authorization: `token ${ds.orgToken}` },
  });
  expect(org.status).toBe(403);
});
