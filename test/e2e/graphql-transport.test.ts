/**
 * /graphql over HTTP: the Accept values of REST (contract §1) and automatic persisted queries
 * (contract §19), over POST and GET, under the same operation limits as a query sent in full.
 */
import { createHash } from 'node:crypto';
import { LIMITS } from '../../src/domain/limits';
import { OPERATOR, startTestApp, type TestApp } from '../helpers/app';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t.stop();
});

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const persisted = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

async function post(body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `token ${OPERATOR}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return { status: r.status, type: r.headers.get('content-type'), body: (await r.json()) as any };
}

async function get(params: Record<string, unknown>) {
  const qs = new URLSearchParams(
    Object.entries(params).map(([k, v]): [string, string] => [
      k,
      typeof v === 'string' ? v : JSON.stringify(v),
    ]),
  );
  const r = await fetch(`${t.url}/graphql?${qs}`, {
    headers: {
      accept: 'application/json',
      'apollo-require-preflight': 'true',
      authorization: `token ${OPERATOR}`,
    },
  });
  return { status: r.status, body: (await r.json()) as any };
}

describe('Accept on /graphql is read as on REST (contract §1)', () => {
  const query = '{ viewer { kind } }';

  test.each(['application/vnd.service.v2+json', 'application/vnd.visii.v2+json'])(
    '%s gets the ordinary JSON answer',
    async (accept) => {
      const r = await post({ query }, { accept });
      expect(r.status).toBe(200);
      expect(r.type).toBe('application/json; charset=utf-8');
      expect(r.body).toEqual({ data: { viewer: { kind: 'OPERATOR' } } });
    },
  );

  test('a vendor v2 type beside others, with parameters, is still v2', async () => {
    const accept = 'application/vnd.visii.v2+json; q=1, application/graphql-response+json; q=0.5';
    const r = await post({ query }, { accept });
    expect(r.status).toBe(200);
    expect(r.body.data.viewer.kind).toBe('OPERATOR');
  });

  test('another version is 406 unsupported_version with the contract body, and nothing runs', async () => {
    const r = await post(
      { query: 'mutation { createOrganisation(name: "acceptv1") { token } }' },
      { accept: 'application/vnd.service.v1+json' },
    );
    expect(r.status).toBe(406);
    expect(r.body).toEqual({
      status: 'error',
      error: {
        code: 'unsupported_version',
        message: expect.stringContaining('application/vnd.service.v1+json'),
        request_id: expect.any(String),
      },
    });
    const orgs = await t.call('GET', '/orgs/acceptv1', { token: OPERATOR });
    expect(orgs.status).toBe(404);
  });
});

describe('automatic persisted queries (contract §19)', () => {
  test('POST: a hash alone is not found until sent with its query, then answers alone', async () => {
    const query = '{ viewer { kind organisation } }';
    const hash = sha256(query);
    const miss = await post({ extensions: persisted(hash) });
    expect(miss.status).toBe(200);
    expect(miss.body.errors[0].message).toBe('PersistedQueryNotFound');
    const registered = await post({ query, extensions: persisted(hash) });
    expect(registered.body).toEqual({ data: { viewer: { kind: 'OPERATOR', organisation: null } } });
    const hit = await post({ extensions: persisted(hash) });
    expect(hit.body).toEqual(registered.body);
  });

  test('GET (behind the CSRF preflight header): the same three steps', async () => {
    const query = 'query ViewerKind { viewer { kind } }';
    const hash = sha256(query);
    const miss = await get({ extensions: persisted(hash) });
    expect(miss.body.errors[0].message).toBe('PersistedQueryNotFound');
    const registered = await get({ query, extensions: persisted(hash) });
    expect(registered.status).toBe(200);
    expect(registered.body).toEqual({ data: { viewer: { kind: 'OPERATOR' } } });
    const hit = await get({ extensions: persisted(hash) });
    expect(hit.status).toBe(200);
    expect(hit.body).toEqual(registered.body);
    // ...and a query registered by GET answers a POST by its hash
    expect((await post({ extensions: persisted(hash) })).body).toEqual(registered.body);
  });

  test('a hash that is not the query’s is refused', async () => {
    const r = await post({ query: '{ viewer { kind } }', extensions: persisted(sha256('other')) });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('invalid_request');
  });

  test('the operation limits apply: a query past one is refused and never persisted', async () => {
    // valid GraphQL but for graphql-armor's alias limit, and past the parser's token limit
    const aliases = Array.from(
      { length: LIMITS.graphqlMaxAliases + 1 },
      (_, i) => `v${i}: viewer { kind }`,
    ).join(' ');
    const tooMany = `query { ${aliases} }`;
    const tooLong = `query { viewer { ${'kind '.repeat(LIMITS.graphqlMaxTokens + 1)} } }`;
    for (const [query, why] of [
      [tooMany, /aliases limit/i],
      [tooLong, /token/i],
    ] as const) {
      const hash = sha256(query);
      const r = await post({ query, extensions: persisted(hash) });
      expect(r.status).toBe(400);
      expect(r.body.data ?? null).toBeNull();
      expect(r.body.errors[0]).toMatchObject({
        message: expect.stringMatching(why),
        extensions: { code: 'invalid_request' },
      });
      const again = await post({ extensions: persisted(hash) });
      expect(again.body.errors[0].message).toBe('PersistedQueryNotFound');
    }
  });
});
