/**
 * GraphQL against hostile or careless input: metadata nested thousands deep is refused by the
 * REST rule (not a stack overflow), production hides "did you mean" hints, and the rate limit
 * keys on the caller exactly as REST does.
 */
import { OPERATOR, setupDataset, startTestApp, type TestApp } from '../helpers/app';
import { gql, onlyError, type GqlResult } from '../helpers/graphql';

let t: TestApp;
let acme: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  t = await startTestApp();
  acme = await setupDataset(t, 'acme', 'shoes');
});
afterAll(() => t.stop());

/** POST /graphql with a body given as text: JSON.stringify itself overflows on deep values. */
async function gqlText(url: string, body: string, token?: string): Promise<GqlResult<any>> {
  const r = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `token ${token}` } : {}),
    },
    body,
  });
  return { httpStatus: r.status, ...((await r.json()) as object) };
}

const nested = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

describe('metadata nested thousands deep', () => {
  const ADD =
    'mutation A($items: [ContentItemInput!]!) { addContent(organisation: "acme", dataset: "shoes", items: $items) { accepted } }';
  const UPDATE =
    'mutation U($items: [ContentUpdateInput!]!) { updateContent(organisation: "acme", dataset: "shoes", items: $items) { accepted } }';
  const body = (query: string, item: string) =>
    `{"query":${JSON.stringify(query)},"variables":{"items":[${item}]}}`;

  test.each([5_000, 200_000])(
    'addContent with metadata %i deep: 400 naming the field, as REST does',
    async (depth) => {
      const item = `{"id":"deep","url":"http://img.test/a.png","metadata":{"x":${nested(depth)}}}`;
      const e = onlyError(await gqlText(t.url, body(ADD, item), acme.orgToken));
      expect(e.extensions).toMatchObject({ code: 'invalid_request', status: 400 });
      const rest = await t.call('POST', `${acme.base}/content`, {
        token: acme.orgToken,
        raw: `{"content":[${item}]}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(rest.status).toBe(400);
      expect(e.extensions.details).toEqual(rest.body.error.details);
      expect(e.extensions.details).toEqual([
        expect.objectContaining({
          field: 'metadata.x',
          message: expect.stringMatching(/nested objects/),
        }),
      ]);
    },
  );

  test('privateMetadata, and updateContent, follow the same rule', async () => {
    const add = `{"id":"deep","url":"http://img.test/a.png","privateMetadata":{"x":${nested(5_000)}}}`;
    const e = onlyError(await gqlText(t.url, body(ADD, add), acme.orgToken));
    expect(e.extensions).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(e.extensions.details?.[0]).toMatchObject({ field: 'privateMetadata.x' });
    const upd = `{"id":"deep","metadata":{"x":${nested(5_000)}}}`;
    const u = onlyError(await gqlText(t.url, body(UPDATE, upd), acme.orgToken));
    expect(u.extensions).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(u.extensions.details?.[0]).toMatchObject({ field: 'metadata.x' });
  });

  test('written inline, the operation is refused by its size, as a client mistake', async () => {
    const literal = '{a:'.repeat(5_000) + '1' + '}'.repeat(5_000);
    const q = `mutation { addContent(organisation: "acme", dataset: "shoes", items: [{id: "d", url: "http://img.test/a.png", metadata: {x: ${literal}}}]) { accepted } }`;
    const e = onlyError(await gqlText(t.url, JSON.stringify({ query: q }), acme.orgToken));
    expect(e.extensions).toMatchObject({ code: 'invalid_request', status: 400 });
  });

  test('flat metadata written inline still works (one level is copied, not lost)', async () => {
    const q = `mutation { addContent(organisation: "acme", dataset: "shoes", items: [{id: "flat", url: "http://img.test/a.png", metadata: {color: "red", tags: ["a", "b"]}, privateMetadata: {cost: 3}}]) { accepted } }`;
    const r = await gqlText(t.url, JSON.stringify({ query: q }), acme.orgToken);
    expect(r.errors).toBeUndefined();
    expect(r.data.addContent.accepted).toBe(1);
    const read = await gqlText(
      t.url,
      JSON.stringify({
        query:
          '{ organisation(name: "acme") { dataset(name: "shoes") { content(limit: 1000) { entries { id item { metadata privateMetadata } } } } } }',
      }),
      acme.orgToken,
    );
    const entry = read.data.organisation.dataset.content.entries.find(
      (e: { id: string }) => e.id === 'flat',
    );
    expect(entry.item).toEqual({
      metadata: { color: 'red', tags: ['a', 'b'] },
      privateMetadata: { cost: 3 },
    });
  });
});

describe('"did you mean" hints', () => {
  let p: TestApp;
  beforeAll(async () => {
    p = await startTestApp({ NODE_ENV: 'production', APP_ROLES: 'api' });
  });
  afterAll(() => p.stop());

  const PLAN =
    'mutation C($plan: PlanInput) { createOrganisation(name: "zz", plan: $plan) { token } }';
  const cases: Array<[string, string, unknown, RegExp]> = [
    ['a mistyped field', '{ viewr { kind } }', undefined, /"viewer"/],
    ['a mistyped argument', '{ organisation(nam: "x") { name } }', undefined, /"name"/],
    [
      'a mistyped enum value inline',
      'mutation { createOrganisation(name: "zz", plan: { credits: { limitType: FIXD } }) { token } }',
      undefined,
      /FIXED/,
    ],
    [
      'a mistyped enum value in variables',
      PLAN,
      { plan: { credits: { limitType: 'FIXD' } } },
      /FIXED/,
    ],
    [
      'a mistyped input field in variables',
      PLAN,
      { plan: { credit: { limitType: 'FIXED', limit: 5 } } },
      /"credits"/,
    ],
  ];

  test.each(cases)('production names nothing for %s', async (_what, query, variables, hint) => {
    const r = await gql(p.url, query, variables as never, OPERATOR);
    const e = r.errors?.[0];
    expect(e?.extensions.code).toBe('invalid_request');
    expect(e?.message).not.toMatch(/Did you mean/i);
    expect(e?.message).not.toMatch(hint);
    expect(e?.message).not.toMatch(/\?\s*$|Suggestion hidden/);
  });

  test('outside production the hints stay, for developers', async () => {
    const [, query, variables] = cases[3]!;
    const r = await gql(t.url, query, variables as never, OPERATOR);
    expect(r.errors?.[0]?.message).toMatch(/Did you mean the enum value "FIXED"\?/);
  });
});

describe('the rate limit keys on the caller, as in REST', () => {
  // Rate limits are kept per API process: one process here, whatever the engine.
  let l: TestApp;
  beforeEach(async () => {
    l = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3', APP_ROLES: 'api,worker' });
  });
  afterEach(() => l.stop());

  const viewer = (authorization?: string) =>
    fetch(`${l.url}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(authorization ? { authorization } : {}),
      },
      body: JSON.stringify({ query: '{ viewer { kind } }' }),
    });

  test('one allowance per token, however the header is written, shared with REST', async () => {
    expect((await l.call('GET', '/orgs/x', { token: OPERATOR })).status).toBe(404);
    expect((await viewer(`TOKEN ${OPERATOR}`)).status).toBe(200);
    expect((await viewer(`Token   ${OPERATOR}`)).status).toBe(200);
    const r = await viewer(`token ${OPERATOR}`);
    expect(r.status).toBe(429);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  test('bad tokens count as failed authentications of the address', async () => {
    const statuses = [];
    for (const token of ['nope-1', 'nope-2', 'nope-3', 'nope-4'])
      statuses.push((await viewer(`token ${token}`)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const unauthorized = await viewer('token nope-5');
    expect(unauthorized.status).toBe(429);
    // A valid token from the same address is not held back by them.
    expect((await viewer(`token ${OPERATOR}`)).status).toBe(200);
  });

  test('without a token (introspection) requests share one allowance per address', async () => {
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await viewer()).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });
});
