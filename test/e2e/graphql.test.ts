/**
 * The GraphQL API end to end: the same services, tokens, errors and limits as REST, with typed
 * operations generated from the committed schema (codegen.yml).
 */
import { LIMITS } from '../../src/domain/limits';
import {
  AddContentDocument,
  ContentWithItemsDocument,
  CreateDatasetDocument,
  CreateOrganisationDocument,
  DeleteContentDocument,
  DetailsDocument,
  FacetsDocument,
  GroupedSearchDocument,
  GroupedSimilarDocument,
  OrganisationOverviewDocument,
  SearchDocument,
  SetEnabledFieldsDocument,
  StoredItemDocument,
  UpdateContentDocument,
  ViewerDocument,
} from '../graphql/generated';
import { OPERATOR, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let orgToken: string;
let dsToken: string;
const org = 'gqlorg';
const dataset = 'gshoes';
const base = `/orgs/${org}/datasets/${dataset}`;
const N = 205;
const COLORS = ['red', 'blue', 'green'];

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  const o = await gql(t.url, CreateOrganisationDocument, { name: org }, OPERATOR);
  orgToken = o.data!.createOrganisation.token;
  const d = await gql(t.url, CreateDatasetDocument, { organisation: org, name: dataset }, orgToken);
  dsToken = d.data!.createDataset.browseToken;
  const items = Array.from({ length: N }, (_, i) => ({
    id: `g-${String(i).padStart(3, '0')}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { color: COLORS[i % 3], price: i % 50, tags: i % 2 ? ['a', 'b'] : ['c'] },
    privateMetadata: { cost: i },
  }));
  const w = await gql(t.url, AddContentDocument, { organisation: org, dataset, items }, orgToken);
  expect(w.data?.addContent.accepted).toBe(N);
  await waitProcessed(t, base, orgToken, N);
}, 120_000);

afterAll(async () => {
  await t.stop();
  await img.close();
});

describe('tokens and scopes are those of REST', () => {
  test('viewer names the token; no token is unauthorized with the contract code', async () => {
    expect((await gql(t.url, ViewerDocument, {}, dsToken)).data?.viewer).toEqual({
      kind: 'DATASET',
      organisation: org,
      dataset,
    });
    expect((await gql(t.url, ViewerDocument, {}, orgToken)).data?.viewer.kind).toBe('ORGANISATION');
    const e = onlyError(await gql(t.url, ViewerDocument, {}));
    expect(e.extensions).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(e.extensions.request_id).toEqual(expect.any(String));
  });

  test('an org token cannot use the Vision API, a dataset token cannot administer', async () => {
    const vars = { organisation: org, dataset, ids: ['g-001'] };
    expect(onlyError(await gql(t.url, DetailsDocument, vars, orgToken)).extensions.code).toBe(
      'forbidden',
    );
    const admin = await gql(t.url, OrganisationOverviewDocument, { name: org }, dsToken);
    expect(onlyError(admin).extensions.code).toBe('forbidden');
  });

  test("another organisation's token sees nothing: not found, as in REST", async () => {
    const other = await gql(t.url, CreateOrganisationDocument, { name: 'gqlother' }, OPERATOR);
    const token = other.data!.createOrganisation.token;
    const r = await gql(t.url, OrganisationOverviewDocument, { name: org }, token);
    expect(onlyError(r).extensions).toMatchObject({ code: 'not_found', status: 404 });
    const rest = await t.call('GET', `/orgs/${org}`, { token });
    expect(rest.body.error.code).toBe('not_found');
  });
});

describe('content writes use the REST validation', () => {
  test('every bad item is named by index and field, and nothing is stored', async () => {
    const items = [
      { id: 'ok-1', url: `${img.url}/img/1.png` },
      { id: 'bad-1', url: 'ftp://example.com/x.png' },
      { id: 'bad-2', url: `${img.url}/img/2.gif` },
    ];
    const r = await gql(t.url, AddContentDocument, { organisation: org, dataset, items }, orgToken);
    const e = onlyError(r);
    expect(e.extensions.code).toBe('invalid_request');
    expect(e.extensions.details).toEqual([
      expect.objectContaining({ index: 1, id: 'bad-1', field: 'url' }),
      expect.objectContaining({ index: 2, id: 'bad-2', field: 'url' }),
    ]);
    const listed = await t.call('GET', `${base}/content?limit=1000`, { token: orgToken });
    expect(listed.body.content.map((c: { id: string }) => c.id)).not.toContain('ok-1');
  });

  test('a wrongly typed variable is a client error, not a 500', async () => {
    const r = await gql(
      t.url,
      AddContentDocument,
      { organisation: org, dataset, items: [{ id: 'x', url: 42 as unknown as string }] },
      orgToken,
    );
    expect(onlyError(r).extensions.code).toBe('invalid_request');
    expect(r.httpStatus).toBe(400);
  });

  test('update merges metadata and null removes a key; delete removes items', async () => {
    const vars = { organisation: org, dataset };
    await gql(
      t.url,
      AddContentDocument,
      { ...vars, items: [{ id: 'tmp', url: `${img.url}/img/7.png`, metadata: { a: 1, b: 2 } }] },
      orgToken,
    );
    const u = await gql(
      t.url,
      UpdateContentDocument,
      { ...vars, items: [{ id: 'tmp', metadata: { b: null, c: 'x' } }] },
      orgToken,
    );
    expect(u.data?.updateContent.accepted).toBe(1);
    const stored = await gql(t.url, StoredItemDocument, { ...vars, id: 'tmp' }, orgToken);
    expect(stored.data?.organisation.dataset.item).toMatchObject({
      url: `${img.url}/img/7.png`,
      metadata: { a: 1, c: 'x' },
    });
    expect(stored.data?.organisation.dataset.item?.metadata).not.toHaveProperty('b');
    const missing = await gql(
      t.url,
      UpdateContentDocument,
      { ...vars, items: [{ id: 'nope', metadata: { c: 'x' } }] },
      orgToken,
    );
    expect(onlyError(missing).extensions.details).toEqual([
      expect.objectContaining({ index: 0, id: 'nope', field: 'id' }),
    ]);
    const listed = await t.call('GET', `${base}/content?offset=0&limit=1000`, { token: orgToken });
    expect(listed.body.content.some((c: { id: string }) => c.id === 'tmp')).toBe(true);
    const d = await gql(t.url, DeleteContentDocument, { ...vars, ids: ['tmp'] }, orgToken);
    expect(d.data?.deleteContent).toBe(true);
    const after = await t.call('GET', `${base}/content?offset=0&limit=1000`, { token: orgToken });
    expect(after.body.content.some((c: { id: string }) => c.id === 'tmp')).toBe(false);
  });

  test('enabling array fields bumps the settings version', async () => {
    const r = await gql(
      t.url,
      SetEnabledFieldsDocument,
      { organisation: org, dataset, fields: [{ name: 'tags', values: ['*'] }] },
      orgToken,
    );
    expect(r.data?.setEnabledFields.settings).toEqual({
      version: 2,
      fields: [{ name: 'tags', values: ['*'] }],
    });
  });
});

describe('DataLoader', () => {
  test('a page of entries with nested items makes one item lookup, not one per entry', async () => {
    const spy = jest.spyOn(t.app.container.ports.content, 'getItems');
    try {
      const r = await gql(
        t.url,
        ContentWithItemsDocument,
        { organisation: org, dataset, limit: 60 },
        orgToken,
      );
      const entries = r.data!.organisation.dataset.content.entries;
      expect(entries).toHaveLength(60);
      expect(r.data!.organisation.dataset.embedder).toEqual({
        id: t.app.container.embedder.id,
        dimensions: 140,
        reprocessing: 0,
      });
      expect(entries[5]!.item).toMatchObject({
        id: entries[5]!.id,
        state: 'PROCESSED',
        privateMetadata: { cost: 5 },
        image: { width: 48, height: 48 },
      });
      expect(spy).toHaveBeenCalledTimes(1);
      expect(spy.mock.calls[0]![1]).toHaveLength(60);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('Vision API', () => {
  test('search returns what REST search returns, with typed accessors', async () => {
    const q = 'color:red|blue,price:10:40';
    const r = await gql(
      t.url,
      SearchDocument,
      { organisation: org, dataset, q, sort: 'price', order: 'ASC', page: 2, limit: 20 },
      dsToken,
    );
    expect(r.errors).toBeUndefined();
    const s = r.data!.vision.search;
    const rest = await t.call(
      'GET',
      `${base}/search?q=${encodeURIComponent(q)}&sort=price&order=asc&page=2&limit=20&fields=color,price,image_width`,
      { token: dsToken },
    );
    expect(s.totalResults).toBe(rest.body.total_results);
    expect(s.results.map((x) => x.id)).toEqual(rest.body.results.map((x: { id: string }) => x.id));
    expect(s.results.map((x) => x.metadata)).toEqual(
      rest.body.results.map((x: { metadata: unknown }) => x.metadata),
    );
    expect(s.hasNextPage).toBe(s.totalResults > 40);
    const first = s.results[0]!;
    expect(typeof first.price).toBe('number');
    expect(['red', 'blue']).toContain(first.color);
    expect(first.tags?.length).toBeGreaterThan(0);
    expect(first.exploreUrl).toContain(`${base}/explore?id=${first.id}`);
  });

  test('a malformed q names its position, as in REST', async () => {
    const r = await gql(
      t.url,
      SearchDocument,
      { organisation: org, dataset, q: 'price:1:2:3' },
      dsToken,
    );
    const e = onlyError(r);
    expect(e.extensions.code).toBe('invalid_request');
    expect(e.extensions.details?.[0]).toMatchObject({ param: 'q', position: expect.any(Number) });
  });

  test('details never expose private metadata; facets count under q', async () => {
    const d = await gql(
      t.url,
      DetailsDocument,
      { organisation: org, dataset, ids: ['g-004', 'unknown', 'g-001'] },
      dsToken,
    );
    expect(d.data!.vision.details.map((x) => x.id)).toEqual(['g-004', 'g-001']);
    expect(d.data!.vision.details[0]!.metadata).not.toHaveProperty('cost');
    expect(d.data!.vision.details[0]!.metadata).toMatchObject({ color: 'blue', price: 4 });
    const f = await gql(
      t.url,
      FacetsDocument,
      { organisation: org, dataset, fields: ['color'], q: 'price:0:9' },
      dsToken,
    );
    const values = f.data!.vision.facets[0]!.values;
    const rest = await t.call('GET', `${base}/content/fields?fields=color&q=price:0:9`, {
      token: dsToken,
    });
    expect(Object.fromEntries(values.map((v) => [v.value, v.count]))).toEqual(
      rest.body.fields.color,
    );
    expect(f.data!.vision.fieldNames).toEqual(
      expect.arrayContaining(['color', 'price', 'image_width']),
    );
  });
});

describe('grouped results (contract §13) are those of REST', () => {
  type RestEntry = {
    id: string;
    score?: number;
    group: { value: unknown; count: number; items?: Array<{ id: string; score?: number }> };
  };
  const restGroups = (entries: RestEntry[]) =>
    entries.map((e) => ({
      id: e.id,
      group: {
        value: e.group.value,
        count: e.group.count,
        items: e.group.items?.map((i) => ({ id: i.id })) ?? null,
      },
    }));

  test.each([
    ['groups', 'GROUPS'],
    ['items', 'ITEMS'],
  ] as const)('search by price, two per group, facets counting %s', async (scope, facetScope) => {
    const q = 'color:red|blue';
    const r = await gql(
      t.url,
      GroupedSearchDocument,
      {
        organisation: org,
        dataset,
        q,
        sort: 'price',
        page: 2,
        limit: 5,
        group: { field: 'price', size: 2 },
        facets: [{ field: 'color', disjunctive: true }, { field: 'price' }],
        facetScope,
      },
      dsToken,
    );
    expect(r.errors).toBeUndefined();
    const s = r.data!.vision.search;
    const rest = await t.call(
      'GET',
      `${base}/search?q=${encodeURIComponent(q)}&sort=price&order=asc&page=2&limit=5&group=price&group_size=2&facets=color,price&disjunctive=color&facet_scope=${scope}`,
      { token: dsToken },
    );
    expect(rest.status).toBe(200);
    expect(s.totalResults).toBe(rest.body.total_results);
    expect(s.totalGroups).toBe(rest.body.total_groups);
    expect(s.totalGroupsExact).toBe(true);
    expect(s.hasNextPage).toBe(2 * 5 < s.totalGroups!);
    const gqlGroups = s.results.map((x) => ({
      id: x.id,
      group: { ...x.group!, items: x.group!.items?.map((i) => ({ id: i.id })) ?? null },
    }));
    expect(gqlGroups).toEqual(restGroups(rest.body.results));
    expect(s.results).toHaveLength(5);
    for (const f of s.facets!) {
      expect(f.exact).toBe(true);
      expect({ buckets: f.buckets, other: f.other, missing: f.missing }).toEqual(
        rest.body.facets[f.field],
      );
    }
  });

  test('similar with group: the target with its own group, then other groups', async () => {
    const r = await gql(
      t.url,
      GroupedSimilarDocument,
      { organisation: org, dataset, id: 'g-007', group: { field: 'color', size: 2 } },
      dsToken,
    );
    expect(r.errors).toBeUndefined();
    const hits = r.data!.vision.similar;
    const rest = await t.call('GET', `${base}/similar?id=g-007&limit=6&group=color&group_size=2`, {
      token: dsToken,
    });
    expect(hits.map((h) => ({ id: h.id, score: h.score, group: h.group }))).toEqual(
      (rest.body.results as RestEntry[]).map((e) => ({
        id: e.id,
        score: e.score,
        group: {
          value: e.group.value,
          count: e.group.count,
          items: e.group.items?.map((i) => ({ id: i.id, score: i.score })) ?? null,
        },
      })),
    );
    // three colours: the target's group first, then the two others once each, and no more
    expect(hits[0]!.group!.value).toBe('blue');
    expect(
      hits
        .slice(1)
        .map((h) => h.group!.value)
        .sort(),
    ).toEqual(['green', 'red']);
    expect(hits[0]!.group!.items).toHaveLength(1);
  });
});

describe('hardening', () => {
  test('depth, alias, cost and token limits refuse an operation before it runs', async () => {
    const deepest = `query { organisation(name: "${org}") { dataset(name: "${dataset}") { content { entries { item { image { width } } } } } } }`;
    expect((await gql(t.url, deepest, {}, orgToken)).errors).toBeUndefined();
    const refused = async (query: string, why: RegExp) => {
      const r = await gql(t.url, query, {}, orgToken);
      expect(r.httpStatus).toBe(400);
      expect(r.data ?? null).toBeNull();
      const e = r.errors?.find((x) => why.test(x.message));
      expect(e?.extensions).toMatchObject({
        code: 'invalid_request',
        request_id: expect.any(String),
      });
    };
    const depth = LIMITS.graphqlMaxDepth + 2;
    await refused(
      `query ${'{ __typename '.repeat(depth)}${'}'.repeat(depth)}`,
      new RegExp(`depth limit of ${LIMITS.graphqlMaxDepth}`),
    );
    const aliases = Array.from(
      { length: LIMITS.graphqlMaxAliases + 1 },
      (_, i) => `v${i}: viewer { kind }`,
    ).join(' ');
    await refused(
      `query { ${aliases} }`,
      new RegExp(`aliases limit of ${LIMITS.graphqlMaxAliases}`, 'i'),
    );
    // a field inside viewer costs more than 1 (weighted by depth): past the cost limit while
    // still within the token limit
    const costly = Math.floor(LIMITS.graphqlMaxTokens * 0.8);
    await refused(`query { viewer { ${'kind '.repeat(costly)} } }`, /cost/i);
    await refused(`query { viewer { ${'kind '.repeat(LIMITS.graphqlMaxTokens + 1)} } }`, /token/i);
  });

  test('a GET operation without a preflight header is refused (CSRF prevention)', async () => {
    const r = await fetch(`${t.url}/graphql?query=${encodeURIComponent('{ viewer { kind } }')}`, {
      headers: { authorization: `token ${orgToken}`, accept: 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(/CSRF/i);
  });

  test('introspection is on outside production', async () => {
    const r = await gql(t.url, '{ __schema { queryType { name } } }');
    expect(r.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
  });
});

describe('production mode', () => {
  let p: TestApp;
  beforeAll(async () => {
    p = await startTestApp({ NODE_ENV: 'production', APP_ROLES: 'api' });
  });
  afterAll(() => p.stop());

  test('introspection is off and field suggestions are not given', async () => {
    const r = await gql(p.url, '{ __schema { queryType { name } } }');
    expect(r.errors?.[0]?.extensions.code).toBe('invalid_request');
    expect(r.data ?? null).toBeNull();
    const typo = await gql(p.url, '{ viewr { kind } }', {}, OPERATOR);
    expect(typo.errors?.[0]?.message).not.toMatch(/Did you mean/);
  });

  test('an unexpected failure is internal with no stack and no inner message', async () => {
    jest
      .spyOn(p.app.container.services.auth, 'describe')
      .mockRejectedValueOnce(new Error('secret backend detail'));
    const r = await gql(p.url, ViewerDocument, {}, OPERATOR);
    const e = onlyError(r);
    expect(e.extensions.code).toBe('internal');
    expect(JSON.stringify(r)).not.toMatch(/secret backend detail|stacktrace|at .*\.ts/);
    expect(e.extensions.request_id).toEqual(expect.any(String));
  });
});
