/**
 * Webhook management (contract §17), adversarially, over REST and GraphQL on whichever engine
 * the project runs: the secret shown once, the tenant boundary, token kinds, validation that
 * names the field, the limit of 20, and the SSRF rules applied at registration.
 */
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { freePort, OPERATOR, setupDataset, startTestApp, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';
import {
  startWebhookReceiver,
  type WebhookReceiver,
  webhookTestEnv,
} from '../helpers/webhook-receiver';

jest.setTimeout(60_000);

let t: TestApp;
let img: ImageServer;
let rx: WebhookReceiver;
let a: Awaited<ReturnType<typeof setupDataset>>;
let b: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  rx = await startWebhookReceiver();
  t = await startTestApp(webhookTestEnv(img.url, [rx]));
  a = await setupDataset(t, 'mgmta', 'shoes');
  b = await setupDataset(t, 'mgmtb', 'hats');
});
afterAll(async () => {
  await t?.stop();
  await img?.close();
  await rx?.close();
});

// each test starts with no webhooks, whatever the one before left
afterEach(async () => {
  for (const o of [a, b]) {
    const org = o.base.split('/')[2]!;
    const l = await t.call('GET', `/orgs/${org}/webhooks`, { token: o.orgToken });
    for (const w of l.body.webhooks ?? [])
      await t.call('DELETE', `/orgs/${org}/webhooks/${w.id}`, { token: o.orgToken });
  }
});

const EVENTS = ['items.processed', 'items.failed', 'dataset.published', 'usage.threshold'];

const create = (org: string, token: string, body: unknown) =>
  t.call('POST', `/orgs/${org}/webhooks`, { token, body });

describe('REST', () => {
  test('create 201 with a secret shown once; list, get, delete', async () => {
    const made = await create('mgmta', a.orgToken, {
      url: rx.url,
      events: ['items.processed', 'dataset.published'],
      datasets: ['shoes'],
    });
    expect(made.status).toBe(201);
    expect(made.body.status).toBe('ok');
    expect(made.body.secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
    // the secret's bytes are base64 after the prefix (Standard Webhooks), at least 128 bits
    expect(Buffer.from(made.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(16);
    const w = made.body.webhook;
    expect(w).toEqual({
      id: expect.any(String),
      url: rx.url,
      events: ['items.processed', 'dataset.published'],
      datasets: ['shoes'],
      state: 'active',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
    });
    const secret = made.body.secret as string;

    const list = await t.call('GET', '/orgs/mgmta/webhooks', { token: a.orgToken });
    expect(list.status).toBe(200);
    expect(list.body.webhooks.map((x: { id: string }) => x.id)).toContain(w.id);
    const got = await t.call('GET', `/orgs/mgmta/webhooks/${w.id}`, { token: a.orgToken });
    expect(got.status).toBe(200);
    expect(got.body.webhook).toEqual(w);
    // never again: not in list, get or the delivery log
    for (const r of [list, got]) {
      expect(JSON.stringify(r.body)).not.toContain(secret);
      expect(JSON.stringify(r.body)).not.toContain('whsec_');
    }
    // a second webhook gets another secret
    const other = await create('mgmta', a.orgToken, { url: rx.url, events: ['items.failed'] });
    expect(other.status).toBe(201);
    expect(other.body.secret).not.toBe(secret);
    expect(other.body.webhook.datasets).toBeNull();

    const del = await t.call('DELETE', `/orgs/mgmta/webhooks/${w.id}`, { token: a.orgToken });
    expect(del.status).toBe(200);
    expect(
      (await t.call('GET', `/orgs/mgmta/webhooks/${w.id}`, { token: a.orgToken })).status,
    ).toBe(404);
    expect(
      (await t.call('DELETE', `/orgs/mgmta/webhooks/${w.id}`, { token: a.orgToken })).status,
    ).toBe(404);
    const after = await t.call('GET', '/orgs/mgmta/webhooks', { token: a.orgToken });
    expect(after.body.webhooks.map((x: { id: string }) => x.id)).not.toContain(w.id);
    await t.call('DELETE', `/orgs/mgmta/webhooks/${other.body.webhook.id}`, {
      token: a.orgToken,
    });
  });

  test("another organisation's token sees nothing of A's webhooks or deliveries", async () => {
    const made = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    expect(made.status).toBe(201);
    const id = made.body.webhook.id as string;
    const log = await t.call('GET', `/orgs/mgmta/webhooks/${id}/deliveries`, {
      token: a.orgToken,
    });
    expect(log.status).toBe(200);
    expect(log.body).toEqual({ status: 'ok', deliveries: [] });
    // B's token on A's paths: no existence oracle
    for (const [m, p] of [
      ['GET', '/orgs/mgmta/webhooks'],
      ['GET', `/orgs/mgmta/webhooks/${id}`],
      ['GET', `/orgs/mgmta/webhooks/${id}/deliveries`],
      ['POST', `/orgs/mgmta/webhooks/${id}/deliveries/msg_x/retry`],
      ['DELETE', `/orgs/mgmta/webhooks/${id}`],
    ] as const) {
      const r = await t.call(m, p, { token: b.orgToken });
      expect([m, p, r.status, r.body.error?.code]).toEqual([m, p, 404, 'not_found']);
    }
    expect(
      (await create('mgmta', b.orgToken, { url: rx.url, events: EVENTS })).body.error?.code,
    ).toBe('not_found');
    // A's webhook id under B's own organisation: unknown there
    for (const [m, p] of [
      ['GET', `/orgs/mgmtb/webhooks/${id}`],
      ['GET', `/orgs/mgmtb/webhooks/${id}/deliveries`],
      ['POST', `/orgs/mgmtb/webhooks/${id}/deliveries/msg_x/retry`],
      ['DELETE', `/orgs/mgmtb/webhooks/${id}`],
    ] as const) {
      const r = await t.call(m, p, { token: b.orgToken });
      expect([m, p, r.status, r.body.error?.code]).toEqual([m, p, 404, 'not_found']);
    }
    const listB = await t.call('GET', '/orgs/mgmtb/webhooks', { token: b.orgToken });
    expect(listB.body.webhooks).toEqual([]);
    // B cannot follow A's dataset by name either: it is B's namespace
    const cross = await create('mgmtb', b.orgToken, {
      url: rx.url,
      events: EVENTS,
      datasets: ['shoes'],
    });
    expect([cross.status, cross.body.error?.code]).toEqual([404, 'not_found']);
    // still there for A
    expect((await t.call('GET', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken })).status).toBe(
      200,
    );
    await t.call('DELETE', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken });
  });

  test('dataset token, scoped token and operator token are refused 403', async () => {
    const made = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    const id = made.body.webhook.id as string;
    const sc = await t.call('POST', `${a.base}/scoped-tokens`, { token: a.orgToken, body: {} });
    expect(sc.status).toBe(201);
    const tokens = { dataset: a.dsToken, scoped: sc.body.token as string, operator: OPERATOR };
    for (const [kind, token] of Object.entries(tokens)) {
      for (const [m, p, body] of [
        ['POST', '/orgs/mgmta/webhooks', { url: rx.url, events: EVENTS }],
        ['GET', '/orgs/mgmta/webhooks', undefined],
        ['GET', `/orgs/mgmta/webhooks/${id}`, undefined],
        ['GET', `/orgs/mgmta/webhooks/${id}/deliveries`, undefined],
        ['POST', `/orgs/mgmta/webhooks/${id}/deliveries/msg_x/retry`, undefined],
        ['DELETE', `/orgs/mgmta/webhooks/${id}`, undefined],
      ] as const) {
        const r = await t.call(m, p, { token, ...(body ? { body } : {}) });
        expect([kind, m, p, r.status, r.body.error?.code]).toEqual([kind, m, p, 403, 'forbidden']);
      }
    }
    for (const [m, p] of [
      ['GET', '/orgs/mgmta/webhooks'],
      ['POST', '/orgs/mgmta/webhooks'],
    ] as const)
      expect(
        (await t.call(m, p, m === 'POST' ? { body: { url: rx.url, events: EVENTS } } : {})).status,
      ).toBe(401);
    // nothing was deleted by the refused calls
    expect((await t.call('GET', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken })).status).toBe(
      200,
    );
    await t.call('DELETE', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken });
  });

  test('validation: 400 invalid_request naming the field; unknown dataset 404', async () => {
    const cases: Array<[unknown, string]> = [
      [{ url: 'not a url', events: EVENTS }, 'url'],
      [{ url: 'ftp://127.0.0.1/x', events: EVENTS }, 'url'],
      [{ url: 'file:///etc/passwd', events: EVENTS }, 'url'],
      [{ url: `http://user:pw@127.0.0.1:${rx.port}/hook`, events: EVENTS }, 'url'],
      [{ url: `http://127.0.0.1:${rx.port}/${'x'.repeat(5000)}`, events: EVENTS }, 'url'],
      [{ url: rx.url, events: ['items.nope'] }, 'events[0]'],
      [{ url: rx.url, events: ['items.processed', 'dataset.deleted'] }, 'events[1]'],
      [{ url: rx.url, events: [] }, 'events'],
      [{ url: rx.url, events: EVENTS, datasets: [] }, 'datasets'],
    ];
    for (const [body, field] of cases) {
      const r = await create('mgmta', a.orgToken, body);
      expect([JSON.stringify(body).slice(0, 80), r.status, r.body.error?.code]).toEqual([
        JSON.stringify(body).slice(0, 80),
        400,
        'invalid_request',
      ]);
      const fields = (r.body.error.details ?? []).map(
        (d: { field?: string; param?: string }) => d.field ?? d.param,
      );
      expect([JSON.stringify(body).slice(0, 80), fields]).toEqual([
        JSON.stringify(body).slice(0, 80),
        expect.arrayContaining([field]),
      ]);
    }
    // shape errors: missing or mistyped fields are 400 too, never 500
    for (const body of [{}, { url: rx.url }, { events: EVENTS }, { url: 5, events: EVENTS }]) {
      const r = await create('mgmta', a.orgToken, body);
      expect([JSON.stringify(body), r.status, r.body.error?.code]).toEqual([
        JSON.stringify(body),
        400,
        'invalid_request',
      ]);
    }
    const unknown = await create('mgmta', a.orgToken, {
      url: rx.url,
      events: EVENTS,
      datasets: ['shoes', 'nope'],
    });
    expect([unknown.status, unknown.body.error?.code]).toEqual([404, 'not_found']);
    expect(unknown.body.error.message).toContain('nope');
    // nothing was stored by any refusal
    const list = await t.call('GET', '/orgs/mgmta/webhooks', { token: a.orgToken });
    expect(list.body.webhooks).toEqual([]);
  });

  test('SSRF at registration: private, link-local, loopback and names resolving to them', async () => {
    const closed = await freePort();
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://10.1.2.3/hook',
      'http://[::1]/hook',
      `http://[::1]:${rx.port}/hook`,
      `http://[::ffff:127.0.0.1]:${closed}/hook`,
      `http://localhost:${closed}/hook`,
      `http://127.0.0.1:${closed}/hook`,
      'http://192.168.0.1/hook',
      'http://0.0.0.0/hook',
    ]) {
      const r = await create('mgmta', a.orgToken, { url, events: EVENTS });
      expect([url, r.status, r.body.error?.code]).toEqual([url, 400, 'invalid_request']);
      expect(r.body.error.details.map((d: { field?: string }) => d.field)).toContain('url');
    }
    // the receiver's listed host:port is allowed
    const ok = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    expect(ok.status).toBe(201);
    await t.call('DELETE', `/orgs/mgmta/webhooks/${ok.body.webhook.id}`, { token: a.orgToken });
  });

  test('the 21st webhook is refused; deleting one makes room', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await create('mgmta', a.orgToken, { url: `${rx.url}?n=${i}`, events: EVENTS });
      expect([i, r.status]).toEqual([i, 201]);
      ids.push(r.body.webhook.id);
    }
    const over = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    expect([over.status, over.body.error?.code]).toEqual([400, 'invalid_request']);
    expect(
      (await t.call('GET', '/orgs/mgmta/webhooks', { token: a.orgToken })).body.webhooks,
    ).toHaveLength(20);
    // another organisation's limit is its own
    const inB = await create('mgmtb', b.orgToken, { url: rx.url, events: EVENTS });
    expect(inB.status).toBe(201);
    await t.call('DELETE', `/orgs/mgmta/webhooks/${ids.pop()}`, { token: a.orgToken });
    const again = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    expect(again.status).toBe(201);
    ids.push(again.body.webhook.id);
    for (const id of ids)
      await t.call('DELETE', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken });
    await t.call('DELETE', `/orgs/mgmtb/webhooks/${inB.body.webhook.id}`, { token: b.orgToken });
  });

  test('deliveries: limit validated, unknown delivery retry 404', async () => {
    const made = await create('mgmta', a.orgToken, { url: rx.url, events: EVENTS });
    const id = made.body.webhook.id as string;
    for (const limit of ['0', '1001', 'x', '-1']) {
      const r = await t.call('GET', `/orgs/mgmta/webhooks/${id}/deliveries?limit=${limit}`, {
        token: a.orgToken,
      });
      expect([limit, r.status, r.body.error?.code]).toEqual([limit, 400, 'invalid_request']);
    }
    const retry = await t.call('POST', `/orgs/mgmta/webhooks/${id}/deliveries/msg_nope/retry`, {
      token: a.orgToken,
    });
    expect([retry.status, retry.body.error?.code]).toEqual([404, 'not_found']);
    const unknownHook = await t.call('GET', '/orgs/mgmta/webhooks/wh_nope/deliveries', {
      token: a.orgToken,
    });
    expect([unknownHook.status, unknownHook.body.error?.code]).toEqual([404, 'not_found']);
    await t.call('DELETE', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken });
  });
});

describe('GraphQL', () => {
  const CREATE = `mutation C($o: String!, $i: WebhookInput!) {
    createWebhook(organisation: $o, input: $i) {
      secret webhook { id url events datasets state disabledReason createdAt } } }`;
  const LIST = `query L($o: String!) { organisation(name: $o) {
    webhooks { id url events datasets state } } }`;
  const ONE = `query W($o: String!, $id: String!) { organisation(name: $o) {
    webhook(id: $id) { id state deliveries { id type state attempts lastStatus nextAttemptAt } } } }`;
  const DELETE = `mutation D($o: String!, $id: String!) { deleteWebhook(organisation: $o, id: $id) }`;
  const RETRY = `mutation R($o: String!, $w: String!, $d: String!) {
    retryWebhookDelivery(organisation: $o, webhook: $w, delivery: $d) }`;

  test('create, list, get with deliveries, retry unknown, delete; errors carry codes', async () => {
    const made = await gql<any, any>(
      t.url,
      CREATE,
      { o: 'mgmta', i: { url: rx.url, events: ['ITEMS_PROCESSED', 'USAGE_THRESHOLD'] } },
      a.orgToken,
    );
    expect(made.errors).toBeUndefined();
    const c = made.data.createWebhook;
    expect(c.secret).toMatch(/^whsec_/);
    expect(c.webhook).toMatchObject({
      url: rx.url,
      events: ['ITEMS_PROCESSED', 'USAGE_THRESHOLD'],
      datasets: null,
      state: 'ACTIVE',
      disabledReason: null,
    });
    const id = c.webhook.id as string;
    // the REST view of the same webhook (another host, on the production engine)
    const rest = await t.call('GET', `/orgs/mgmta/webhooks/${id}`, { token: a.orgToken });
    expect(rest.body.webhook.events).toEqual(['items.processed', 'usage.threshold']);

    const list = await gql<any, any>(t.url, LIST, { o: 'mgmta' }, a.orgToken);
    expect(list.errors).toBeUndefined();
    expect(list.data.organisation.webhooks.map((w: { id: string }) => w.id)).toContain(id);
    expect(JSON.stringify(list)).not.toContain('whsec_');
    const one = await gql<any, any>(t.url, ONE, { o: 'mgmta', id }, a.orgToken);
    expect(one.errors).toBeUndefined();
    expect(one.data.organisation.webhook).toEqual({ id, state: 'ACTIVE', deliveries: [] });

    const retry = await gql<any, any>(t.url, RETRY, { o: 'mgmta', w: id, d: 'msg_x' }, a.orgToken);
    expect(onlyError(retry).extensions.code).toBe('not_found');

    // B cannot see, retry or delete A's webhook
    const bOne = await gql<any, any>(t.url, ONE, { o: 'mgmta', id }, b.orgToken);
    expect(onlyError(bOne).extensions.code).toBe('not_found');
    const bOwn = await gql<any, any>(t.url, ONE, { o: 'mgmtb', id }, b.orgToken);
    expect(onlyError(bOwn).extensions.code).toBe('not_found');
    const bDel = await gql<any, any>(t.url, DELETE, { o: 'mgmta', id }, b.orgToken);
    expect(onlyError(bDel).extensions.code).toBe('not_found');
    const bDelOwn = await gql<any, any>(t.url, DELETE, { o: 'mgmtb', id }, b.orgToken);
    expect(onlyError(bDelOwn).extensions.code).toBe('not_found');
    const bRetry = await gql<any, any>(t.url, RETRY, { o: 'mgmtb', w: id, d: 'x' }, b.orgToken);
    expect(onlyError(bRetry).extensions.code).toBe('not_found');

    // the dataset token and the operator are forbidden
    for (const token of [a.dsToken, OPERATOR]) {
      const r = await gql<any, any>(
        t.url,
        CREATE,
        { o: 'mgmta', i: { url: rx.url, events: ['ITEMS_PROCESSED'] } },
        token,
      );
      expect(onlyError(r).extensions.code).toBe('forbidden');
      const d = await gql<any, any>(t.url, DELETE, { o: 'mgmta', id }, token);
      expect(onlyError(d).extensions.code).toBe('forbidden');
    }

    const del = await gql<any, any>(t.url, DELETE, { o: 'mgmta', id }, a.orgToken);
    expect(del.data).toEqual({ deleteWebhook: true });
    const gone = await gql<any, any>(t.url, ONE, { o: 'mgmta', id }, a.orgToken);
    expect(onlyError(gone).extensions.code).toBe('not_found');
  });

  test('validation and SSRF over GraphQL: invalid_request naming the field', async () => {
    for (const [i, field] of [
      [{ url: 'http://169.254.169.254/', events: ['ITEMS_PROCESSED'] }, 'url'],
      [{ url: 'http://10.1.2.3/', events: ['ITEMS_PROCESSED'] }, 'url'],
      [{ url: 'nope', events: ['ITEMS_PROCESSED'] }, 'url'],
      [{ url: rx.url, events: [] }, 'events'],
      [{ url: rx.url, events: ['ITEMS_PROCESSED'], datasets: [] }, 'datasets'],
    ] as const) {
      const r = await gql<any, any>(t.url, CREATE, { o: 'mgmta', i }, a.orgToken);
      const e = onlyError(r);
      expect([JSON.stringify(i), e.extensions.code]).toEqual([
        JSON.stringify(i),
        'invalid_request',
      ]);
      expect((e.extensions.details ?? []).map((d) => d.field)).toContain(field);
    }
    const unknown = await gql<any, any>(
      t.url,
      CREATE,
      { o: 'mgmta', i: { url: rx.url, events: ['ITEMS_FAILED'], datasets: ['nope'] } },
      a.orgToken,
    );
    expect(onlyError(unknown).extensions.code).toBe('not_found');
    // an unknown event is refused by the schema (an enum), before any resolver
    const badEnum = await gql<any, any>(
      t.url,
      CREATE,
      { o: 'mgmta', i: { url: rx.url, events: ['items.processed'] } },
      a.orgToken,
    );
    expect(badEnum.errors?.length).toBeGreaterThan(0);
    const l = await gql<any, any>(t.url, LIST, { o: 'mgmta' }, a.orgToken);
    expect(l.data?.organisation.webhooks).toEqual([]);
  });
});
