/**
 * GET /openapi.json (contract §12): every documented operation is called and its real answers
 * (successes and errors) validate against the document; and no route exists that the document
 * lacks, nor a documented operation without a route.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import {
  OPERATOR,
  setupDataset,
  startTestApp,
  waitFor,
  waitProcessed,
  type Res,
  type TestApp,
} from '../helpers/app';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';

type Json = Record<string, any>;
let t: TestApp;
let img: ImageServer;
let doc: Json;
let ajv: Ajv2020;
/** operationId → the statuses whose answers were validated. */
const seen = new Map<string, Set<number>>();

const operations = (): Array<{ id: string; method: string; path: string; op: Json }> =>
  Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, op]) => ({
      id: op.operationId as string,
      method: method.toUpperCase(),
      path,
      op: op as Json,
    })),
  );

const pointer = (...parts: string[]): string =>
  parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** Validates an answer against the document's schema for that operation and status. */
function conforms(id: string, r: Res): void {
  const found = operations().find((o) => o.id === id);
  if (!found) throw new Error(`operation ${id} is not documented`);
  const response = found.op.responses[String(r.status)];
  if (!response)
    throw new Error(`${id} answered ${r.status}, undocumented: ${JSON.stringify(r.body)}`);
  const [type] = Object.keys(response.content);
  expect(r.headers.get('content-type')?.split(';')[0]).toBe(type.split(';')[0]);
  const ref = `openapi#/${pointer('paths', found.path, found.method.toLowerCase(), 'responses', String(r.status), 'content', type, 'schema')}`;
  const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
  if (!validate(r.body))
    throw new Error(
      `${id} ${r.status} does not match the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(r.body).slice(0, 600)}`,
    );
  seen.set(id, (seen.get(id) ?? new Set()).add(r.status));
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  const r = await fetch(`${t.url}/openapi.json`);
  expect(r.status).toBe(200);
  doc = (await r.json()) as Json;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: 'openapi' });
}, 60_000);

afterAll(async () => {
  await t?.stop();
  await img?.close();
});

test('the document is OpenAPI 3.1 and every schema in it compiles', () => {
  expect(doc.openapi).toBe('3.1.0');
  for (const { id, op } of operations()) {
    expect(id).toBeTruthy();
    for (const [status, response] of Object.entries(op.responses as Json))
      for (const media of Object.values((response as Json).content ?? {}))
        expect(() => ajv.compile((media as Json).schema)).not.toThrow(`${id} ${status}`);
  }
  // Errors reference the contract §2 body.
  const create = operations().find((o) => o.id === 'addContent')!;
  expect(create.op.responses['400'].content['application/json'].schema.$ref).toBe(
    '#/components/schemas/Error',
  );
  expect(create.op.requestBody.required).toBe(true);
});

test('every documented operation answers as documented, errors included', async () => {
  const call = (id: string, method: string, path: string, opts: Parameters<TestApp['call']>[2]) =>
    t.call(method, path, opts).then((r) => {
      conforms(id, r);
      return r;
    });
  const op = { token: OPERATOR };
  conforms('healthz', await t.call('GET', '/healthz'));
  conforms('readyz', await t.call('GET', '/readyz'));
  const metrics = await fetch(`${t.url}/metrics`, {
    headers: { authorization: `token ${OPERATOR}` },
  });
  conforms('metrics', {
    status: metrics.status,
    headers: metrics.headers,
    body: await metrics.text(),
  });
  conforms('openapi', await t.call('GET', '/openapi.json'));

  // Organisations and tokens.
  await call('createOrganisation', 'POST', '/orgs', { ...op, body: { name: 'spec', plan: {} } });
  expect(
    (await call('createOrganisation', 'POST', '/orgs', { ...op, body: { name: 'Bad!' } })).status,
  ).toBe(400);
  expect(
    (await call('createOrganisation', 'POST', '/orgs', { ...op, body: { name: 'spec' } })).status,
  ).toBe(409);
  const ds = await setupDataset(t, 'acme', 'shoes');
  const org = { token: ds.orgToken };
  await call('getOrganisation', 'GET', '/orgs/acme', org);
  expect((await call('getOrganisation', 'GET', '/orgs/acme', {})).status).toBe(401);
  await call('setPlan', 'PUT', '/orgs/acme/plan', {
    ...op,
    body: { plan: { credits: { limitType: 'fixed', limit: 100000 } } },
  });
  const issued = await call('issueToken', 'POST', '/orgs/acme/tokens', org);
  await call('listTokens', 'GET', '/orgs/acme/tokens', org);
  await call('revokeToken', 'DELETE', `/orgs/acme/tokens/${issued.body.prefix}`, org);
  await call('usage', 'GET', '/orgs/acme/usage', org);
  expect((await call('usage', 'GET', '/orgs/acme/usage?month=x', org)).status).toBe(400);

  // Datasets.
  await call('createDataset', 'POST', '/orgs/acme/datasets', { ...org, body: { name: 'other' } });
  await call('listDatasets', 'GET', '/orgs/acme/datasets', org);
  await call('getDataset', 'GET', ds.base, org);
  expect((await call('getDataset', 'GET', '/orgs/acme/datasets/nope', org)).status).toBe(404);
  await call('setEnabledFields', 'PUT', `${ds.base}/settings/fields`, {
    ...org,
    body: { fields: { tags: ['*'] } },
  });
  await call('setSimilarity', 'PUT', '/orgs/acme/datasets/other/settings/similarity', {
    ...org,
    body: { learn_from: 'colour', weight: 0.5 },
  });
  expect(
    (
      await call('setSimilarity', 'PUT', '/orgs/acme/datasets/other/settings/similarity', {
        ...org,
        body: { learn_from: 'colour', weight: 2 },
      })
    ).status,
  ).toBe(400);
  await call('getScopedKey', 'GET', '/orgs/acme/datasets/other/scoped-key', org);
  await call('createScopedToken', 'POST', '/orgs/acme/datasets/other/scoped-tokens', {
    ...org,
    body: { q: 'colour:red', types: ['search'], exp: 4_000_000_000 },
  });
  expect(
    (
      await call('createScopedToken', 'POST', '/orgs/acme/datasets/other/scoped-tokens', {
        ...org,
        body: { rate: 0 },
      })
    ).status,
  ).toBe(400);
  await call('rotateBrowseToken', 'POST', '/orgs/acme/datasets/other/browse_token', org);

  // Webhooks: one to a closed port, so its deliveries stay pending for the retry below.
  const hook = await call('createWebhook', 'POST', '/orgs/acme/webhooks', {
    ...org,
    body: { url: 'http://127.0.0.1:9/hook', events: ['items.processed'], datasets: ['shoes'] },
  });
  const hooks = `/orgs/acme/webhooks/${hook.body.webhook.id}`;
  expect(
    (
      await call('createWebhook', 'POST', '/orgs/acme/webhooks', {
        ...org,
        body: { url: 'ftp://x/y', events: [] },
      })
    ).status,
  ).toBe(400);
  await call('listWebhooks', 'GET', '/orgs/acme/webhooks', org);
  await call('getWebhook', 'GET', hooks, org);
  expect((await call('getWebhook', 'GET', '/orgs/acme/webhooks/wh_nope', org)).status).toBe(404);
  await call('deleteDataset', 'DELETE', '/orgs/acme/datasets/other', org);

  // Content: enough processed items for the Vision API, and one that fails.
  const content = Array.from({ length: 205 }, (_, i) => ({
    id: `i${i}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { colour: ['red', 'blue', 'green'][i % 3], price: i, tags: [`t${i % 4}`] },
  }));
  content.push({ id: 'broken', url: `${img.url}/missing.png`, metadata: {} as never });
  const sample = await makeImage(7);
  expect(
    (await call('similar', 'GET', `${ds.base}/similar?id=i1`, { token: ds.dsToken })).status,
  ).toBe(409);
  await call('addContent', 'POST', `${ds.base}/content`, { ...org, body: { content } });
  const bad = await call('addContent', 'POST', `${ds.base}/content`, {
    ...org,
    body: { content: [{ id: 'x', url: 'ftp://x/y.png' }, { id: 7 }] },
  });
  expect(bad.body.error.details.map((d: Json) => [d.index, d.field])).toEqual([
    [0, 'url'],
    [1, 'id'],
    [1, 'url'],
  ]);
  await waitProcessed(t, ds.base, ds.orgToken, content.length, 90_000);
  await call('updateContent', 'PUT', `${ds.base}/content`, {
    ...org,
    body: { content: [{ id: 'i0', metadata: { colour: null } }] },
  });
  await call('listContent', 'GET', `${ds.base}/content?limit=5&offset=1`, org);
  const pending = await waitFor('a webhook delivery', async () => {
    const r = await call('listWebhookDeliveries', 'GET', `${hooks}/deliveries?limit=5`, org);
    return r.body.deliveries[0] as Json | undefined;
  });
  await call('retryWebhookDelivery', 'POST', `${hooks}/deliveries/${pending.id}/retry`, org);
  expect(
    (await call('retryWebhookDelivery', 'POST', `${hooks}/deliveries/msg_nope/retry`, org)).status,
  ).toBe(404);
  expect(
    (await call('listWebhookDeliveries', 'GET', `${hooks}/deliveries?limit=0`, org)).status,
  ).toBe(400);
  await call('deleteWebhook', 'DELETE', hooks, org);
  await call('processingErrors', 'GET', `${ds.base}/errors`, org);

  // The Vision API.
  const dsTok = { token: ds.dsToken };
  await call('contentDetails', 'GET', `${ds.base}/content/details?ids=i1,i2&fields=*`, dsTok);
  await call('contentFields', 'GET', `${ds.base}/content/fields?fields=*`, dsTok);
  await call('contentFields', 'GET', `${ds.base}/content/fields?fields=colour&q=price:10:`, dsTok);
  const found = await call(
    'search',
    'GET',
    `${ds.base}/search?q=colour:red&sort=price&order=asc&limit=5&fields=*&facets=colour,tags&disjunctive=colour&stats=price&histogram=price:50,service_created_at:day&v=a:search,page_view_id:pv1`,
    dsTok,
  );
  expect(found.body.results).toHaveLength(5);
  expect((await call('search', 'GET', `${ds.base}/search?q=price:9:1`, dsTok)).status).toBe(400);
  expect((await call('search', 'GET', `${ds.base}/search`, org)).status).toBe(403);
  await call(
    'similar',
    'GET',
    `${ds.base}/similar?id=i1&limit=4&exclude_parent=true&v=page_view_id:pv1`,
    dsTok,
  );
  expect((await call('similar', 'GET', `${ds.base}/similar?id=nope`, dsTok)).status).toBe(404);
  const explored = await call('explore', 'GET', `${ds.base}/explore?limit=4`, dsTok);
  await call(
    'explore',
    'GET',
    new URL(explored.body.results[0].explore_url).pathname +
      new URL(explored.body.results[0].explore_url).search,
    dsTok,
  );
  await call('lens', 'POST', `${ds.base}/search?limit=3`, {
    ...dsTok,
    body: { image: `data:image/png;base64,${sample.toString('base64')}` },
  });
  await call('collection', 'GET', `${ds.base}/collection?ids=i1,i2&limit=3`, dsTok);
  await call('track', 'POST', `${ds.base}/track?v=a:click,id:i1,page_view_id:pv1`, dsTok);
  await call('track', 'POST', `${ds.base}/track`, {
    ...dsTok,
    body: { events: [{ v: 'a:purchase,id:i2', timestamp: new Date().toISOString() }] },
  });
  expect(
    (await call('track', 'POST', `${ds.base}/track`, { ...dsTok, body: { events: 3 } })).status,
  ).toBe(400);
  await call('analytics', 'GET', `${ds.base}/analytics?interval=day`, org);
  await call('duplicates', 'GET', `${ds.base}/duplicates?limit=5`, org);
  expect((await call('duplicates', 'GET', `${ds.base}/duplicates?cursor=%21`, org)).status).toBe(
    400,
  );
  await call('dismissDuplicates', 'POST', `${ds.base}/duplicates/dismiss`, {
    ...org,
    body: { ids: ['i1', 'i2'] },
  });
  await call('deleteContent', 'DELETE', `${ds.base}/content`, { ...org, body: { ids: ['i204'] } });

  const missing = operations().filter(
    (o) => !seen.get(o.id)?.has(Number(Object.keys(o.op.responses)[0])),
  );
  expect(missing.map((o) => o.id)).toEqual([]);
}, 180_000);

/** Routes that are not the REST interface: GraphQL and the pages people look at. */
const NOT_REST = new Set([
  'GET /graphql',
  'POST /graphql',
  'GET /graphql/assets/:file',
  'GET /',
  'GET /console/assets/:file',
]);

test('no route is missing from the document, and no documented operation lacks a route', () => {
  const table = t.app.server!.routeTable.map((r) => `${r.method} ${r.url}`);
  const documented = operations().map((o) => `${o.method} ${o.path.replace(/\{(\w+)\}/g, ':$1')}`);
  expect(table.filter((r) => !NOT_REST.has(r) && !documented.includes(r))).toEqual([]);
  expect(documented.filter((d) => !table.includes(d))).toEqual([]);
});
