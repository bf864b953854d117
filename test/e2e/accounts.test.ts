import { OPERATOR, setupDataset, startTestApp, type TestApp } from '../helpers/app';

let t: TestApp;
let acme: Awaited<ReturnType<typeof setupDataset>>;
let other: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  t = await startTestApp();
  acme = await setupDataset(t, 'acme', 'shoes');
  other = await setupDataset(t, 'globex', 'hats');
});
afterAll(() => t.stop());

describe('organisations and tokens', () => {
  it('creates an organisation with a default unlimited plan and an org token shown once', async () => {
    const r = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'initech' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      status: 'ok',
      organisation: {
        name: 'initech',
        plan: { credits: { limitType: 'unlimited' }, images: { limitType: 'unlimited' } },
      },
    });
    expect(r.body.token).toMatch(/^org_/);
    const again = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'initech' } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
  });

  it('validates names and plans', async () => {
    const bad = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'Has Spaces' } });
    expect(bad.status).toBe(400);
    const plan = await t.call('POST', '/orgs', {
      token: OPERATOR,
      body: { name: 'p1', plan: { credits: { limitType: 'fixed' } } },
    });
    expect(plan.status).toBe(400);
    expect(plan.body.error.details[0].field).toBe('plan.credits.limit');
  });

  it('only the operator creates organisations', async () => {
    const r = await t.call('POST', '/orgs', { token: acme.orgToken, body: { name: 'x1' } });
    expect(r.status).toBe(403);
  });

  it('issues, lists and revokes org tokens', async () => {
    const issued = await t.call('POST', '/orgs/acme/tokens', { token: acme.orgToken });
    expect(issued.status).toBe(201);
    const second = issued.body.token as string;
    expect((await t.call('GET', '/orgs/acme/datasets', { token: second })).status).toBe(200);
    const list = await t.call('GET', '/orgs/acme/tokens', { token: acme.orgToken });
    expect(list.body.tokens.map((x: { prefix: string }) => x.prefix)).toContain(issued.body.prefix);
    expect(JSON.stringify(list.body)).not.toContain(second);
    const del = await t.call('DELETE', `/orgs/acme/tokens/${issued.body.prefix}`, {
      token: acme.orgToken,
    });
    expect(del.status).toBe(200);
    expect((await t.call('GET', '/orgs/acme/datasets', { token: second })).status).toBe(401);
  });
});

describe('datasets', () => {
  it('returns the dataset object of the contract', async () => {
    const r = await t.call('GET', acme.base, { token: acme.orgToken });
    expect(r.status).toBe(200);
    expect(r.body.dataset).toEqual({
      name: 'shoes',
      browse_token: acme.dsToken,
      content_url: `${t.url}/orgs/acme/datasets/shoes/content`,
      processing_errors_url: `${t.url}/orgs/acme/datasets/shoes/errors`,
      settings: { fields: {}, version: 1 },
      status: 'pending',
      created_at: expect.any(String),
      counts: { items: 0, processed: 0, pending: 0, errors: 0 },
    });
  });

  it('creates with 201 and dataset_url, refuses duplicates and bad names', async () => {
    const r = await t.call('POST', '/orgs/acme/datasets', {
      token: acme.orgToken,
      body: { name: 'boots-2' },
    });
    expect(r.status).toBe(201);
    expect(r.body.dataset_url).toBe(`${t.url}/orgs/acme/datasets/boots-2`);
    expect(
      (
        await t.call('POST', '/orgs/acme/datasets', {
          token: acme.orgToken,
          body: { name: 'boots-2' },
        })
      ).status,
    ).toBe(409);
    expect(
      (await t.call('POST', '/orgs/acme/datasets', { token: acme.orgToken, body: { name: 'a/b' } }))
        .status,
    ).toBe(400);
    const list = await t.call('GET', '/orgs/acme/datasets', { token: acme.orgToken });
    expect(list.body.datasets.map((d: { name: string }) => d.name)).toEqual(['boots-2', 'shoes']);
  });

  it('rotates the browse token: the old one stops working', async () => {
    await t.call('POST', '/orgs/acme/datasets', { token: acme.orgToken, body: { name: 'rot' } });
    const before = (await t.call('GET', '/orgs/acme/datasets/rot', { token: acme.orgToken })).body
      .dataset.browse_token;
    const r = await t.call('POST', '/orgs/acme/datasets/rot/browse_token', {
      token: acme.orgToken,
    });
    expect(r.body.dataset.browse_token).not.toBe(before);
    expect(
      (await t.call('GET', '/orgs/acme/datasets/rot/content/details?ids=a', { token: before }))
        .status,
    ).toBe(401);
    expect(
      (
        await t.call('GET', '/orgs/acme/datasets/rot/content/details?ids=a', {
          token: r.body.dataset.browse_token,
        })
      ).status,
    ).toBe(200);
  });

  it('deletes permanently; the name is free again and the old token is dead', async () => {
    await t.call('POST', '/orgs/acme/datasets', { token: acme.orgToken, body: { name: 'gone' } });
    const tok = (await t.call('GET', '/orgs/acme/datasets/gone', { token: acme.orgToken })).body
      .dataset.browse_token;
    expect(
      (await t.call('DELETE', '/orgs/acme/datasets/gone', { token: acme.orgToken })).status,
    ).toBe(200);
    expect((await t.call('GET', '/orgs/acme/datasets/gone', { token: acme.orgToken })).status).toBe(
      404,
    );
    expect(
      (await t.call('GET', '/orgs/acme/datasets/gone/content/details?ids=a', { token: tok }))
        .status,
    ).toBe(401);
    const usage = await t.call('GET', '/orgs/acme/usage', { token: acme.orgToken });
    expect(usage.body.usage.datasets.gone).toMatchObject({ deleted: true });
    expect(
      (
        await t.call('POST', '/orgs/acme/datasets', {
          token: acme.orgToken,
          body: { name: 'gone' },
        })
      ).status,
    ).toBe(201);
  });

  it('bumps settings.version only when the enabled fields change', async () => {
    const put = (fields: unknown) =>
      t.call('PUT', `${acme.base}/settings/fields`, { token: acme.orgToken, body: { fields } });
    const r1 = await put({ sizes: ['s', 'm'], colours: ['*'] });
    expect(r1.status).toBe(200);
    expect(r1.body.dataset.settings).toEqual({
      fields: { sizes: ['s', 'm'], colours: ['*'] },
      version: 2,
    });
    expect((await put({ colours: ['*'], sizes: ['m', 's'] })).body.dataset.settings.version).toBe(
      2,
    );
    expect((await put({ sizes: ['s'] })).body.dataset.settings).toEqual({
      fields: { sizes: ['s'] },
      version: 3,
    });
    const tooMany = await put({ a: Array.from({ length: 201 }, (_, i) => `v${i}`) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.message).toContain('at most 200');
  });
});

describe('authentication, scopes and tenancy', () => {
  const details = (base: string) => `${base}/content/details?ids=a`;

  it('401 for missing, malformed and unknown tokens', async () => {
    for (const headers of <Array<Record<string, string>>>[
      {},
      { authorization: 'Bearer x' },
      { authorization: 'token org_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB' },
    ]) {
      const r = await t.call('GET', acme.base, { headers });
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ status: 'error', error: { code: 'unauthorized' } });
    }
  });

  it('403 for the right tenant with the wrong kind of token', async () => {
    expect((await t.call('GET', details(acme.base), { token: acme.orgToken })).status).toBe(403);
    expect((await t.call('GET', `${acme.base}/content`, { token: acme.dsToken })).status).toBe(403);
    expect((await t.call('GET', '/orgs/acme/usage', { token: acme.dsToken })).status).toBe(403);
    expect((await t.call('GET', `${acme.base}/content`, { token: OPERATOR })).status).toBe(403);
  });

  it('404 for every resource of another tenant, exactly as for a missing one', async () => {
    const foreign = await t.call('GET', other.base, { token: acme.orgToken });
    const missing = await t.call('GET', '/orgs/nope/datasets/nothing', { token: acme.orgToken });
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    expect((await t.call('GET', details(other.base), { token: acme.dsToken })).status).toBe(404);
    expect((await t.call('GET', '/orgs/globex/usage', { token: acme.orgToken })).status).toBe(404);
    expect(
      (
        await t.call('POST', `${other.base}/content`, {
          token: acme.orgToken,
          body: { content: [] },
        })
      ).status,
    ).toBe(404);
  });

  it('a dataset token opens only its own dataset', async () => {
    await t.call('POST', '/orgs/acme/datasets', {
      token: acme.orgToken,
      body: { name: 'sibling' },
    });
    expect(
      (await t.call('GET', details('/orgs/acme/datasets/sibling'), { token: acme.dsToken })).status,
    ).toBe(404);
  });
});

describe('HTTP conventions', () => {
  it('negotiates the version by Accept', async () => {
    for (const accept of ['application/vnd.visii.v2+json', '*/*', 'application/json']) {
      expect(
        (await t.call('GET', acme.base, { token: acme.orgToken, headers: { accept } })).status,
      ).toBe(200);
    }
    const r = await t.call('GET', acme.base, {
      token: acme.orgToken,
      headers: { accept: 'application/vnd.service.v1+json' },
    });
    expect(r.status).toBe(406);
    expect(r.body.error.code).toBe('unsupported_version');
  });

  it('sends X-Request-Id on every response and repeats it in errors', async () => {
    const ok = await t.call('GET', '/healthz');
    expect(ok.headers.get('x-request-id')).toBeTruthy();
    const err = await t.call('GET', acme.base);
    expect(err.body.error.request_id).toBe(err.headers.get('x-request-id'));
    expect(err.headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('415 for a non-JSON body, 400 for broken JSON, 413 above 5 MB', async () => {
    const p = `${acme.base}/content`;
    const plain = await t.call('POST', p, {
      token: acme.orgToken,
      raw: 'id=1',
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(415);
    expect(plain.body.error.code).toBe('unsupported_media_type');
    const broken = await t.call('POST', p, {
      token: acme.orgToken,
      raw: '{"content": [',
      headers: { 'content-type': 'application/json' },
    });
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe('invalid_request');
    const big = JSON.stringify({
      content: [
        { id: 'a', url: 'http://x.test/a.png', metadata: { pad: 'x'.repeat(5 * 1024 * 1024) } },
      ],
    });
    const tooBig = await t.call('POST', p, {
      token: acme.orgToken,
      raw: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error.code).toBe('payload_too_large');
    const justUnder = JSON.stringify({
      content: [
        { id: 'a', url: 'http://x.test/a.png', metadata: { pad: 'x'.repeat(4 * 1024 * 1024) } },
      ],
    });
    const ok = await t.call('POST', p, {
      token: acme.orgToken,
      raw: justUnder,
      headers: { 'content-type': 'application/json' },
    });
    expect(ok.status).toBe(400); // over the per-string metadata limit, but parsed: not a 413
    expect(ok.body.error.details[0].field).toBe('metadata.pad');
  });

  it('answers unknown routes with the error body', async () => {
    const r = await t.call('GET', '/nothing/here', { token: acme.orgToken });
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
  });

  it('reports readiness of store and queue', async () => {
    const r = await t.call('GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body.checks).toEqual({ accounts: 'ok', store: 'ok', queue: 'ok' });
  });
});

describe('rate limit', () => {
  it('429 with Retry-After and the error body past the per-token limit', async () => {
    // rate limits are kept per API process (one host here; see docs/configuration.md)
    const limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3', APP_ROLES: 'api,worker' });
    try {
      const codes = [];
      for (let i = 0; i < 4; i++)
        codes.push((await limited.call('GET', '/orgs/x', { token: OPERATOR })).status);
      expect(codes.slice(0, 3)).not.toContain(429);
      const r = await limited.call('GET', '/orgs/x', { token: OPERATOR });
      expect(r.status).toBe(429);
      expect(r.body.error.code).toBe('rate_limited');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});
