/**
 * Metering (contract §8) through both transports: what counts, what does not, fixed packages
 * decided atomically, image counts, and the GET usage report.
 */
import { AppError } from '../../src/domain/errors';
import { requeueUnfinished } from '../../src/jobs/process-image';
import { OPERATOR, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { gql } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
const READY = 200;

interface Org {
  name: string;
  orgToken: string;
  dsToken: string;
  base: string;
}

/** An organisation with one published dataset of READY processed items. */
async function publishedOrg(name: string, plan?: unknown): Promise<Org> {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name, plan } });
  expect(o.status).toBe(201);
  const d = await t.call('POST', `/orgs/${name}/datasets`, {
    token: o.body.token,
    body: { name: 'cat' },
  });
  const base = `/orgs/${name}/datasets/cat`;
  const content = Array.from({ length: READY }, (_, i) => ({
    id: `i${i}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { color: i % 2 ? 'red' : 'blue' },
  }));
  await t.call('POST', `${base}/content`, { token: o.body.token, body: { content } });
  await waitProcessed(t, base, o.body.token, READY);
  return { name, orgToken: o.body.token, dsToken: d.body.dataset.browse_token, base };
}

/** Every job queued so far has been handled: none waits, is delayed or runs, on any process. */
const queueDrained = () =>
  waitFor('the job queue drained', async () => {
    const stats = await Promise.all(t.hosts.map((h) => h.container.ports.queue.stats()));
    return stats.every((s) => s.ready + s.delayed + s.running === 0);
  });

/** The report once every charge admitted so far is recorded. */
const usage = async (o: Org, qs = '') => {
  await t.chargesRecorded();
  return (await t.call('GET', `/orgs/${o.name}/usage${qs}`, { token: o.orgToken })).body.usage;
};

const SEARCH = `query S($o: String!, $q: String) {
  vision(organisation: $o, dataset: "cat") { search(q: $q) { totalResults } } }`;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
}, 60_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

test('successful searches count on both transports, each GraphQL alias once; failures, 409s and details do not', async () => {
  const started = t.clock.now();
  const o = await publishedOrg('meter1', { requestCredits: { search: 0.5 } });
  const before = await usage(o);
  expect(before.credits).toMatchObject({ limitType: 'unlimited', used: 0 });
  expect(before.images).toMatchObject({ processed: READY, total: READY });

  expect((await t.call('GET', `${o.base}/search?q=color:red`, { token: o.dsToken })).status).toBe(
    200,
  );
  // zero results still count
  const none = await t.call('GET', `${o.base}/search?q=color:green&v=a:click`, {
    token: o.dsToken,
  });
  expect(none.body.total_results).toBe(0);
  const three = await gql(
    t.url,
    `{ a: vision(organisation: "meter1", dataset: "cat") { x: search { totalResults } y: search(q: "color:red") { totalResults } }
       b: vision(organisation: "meter1", dataset: "cat") { search { totalResults } } }`,
    {},
    o.dsToken,
  );
  expect(three.errors).toBeUndefined();
  // not counted: a malformed q, a bad page, content/details, facets
  expect((await t.call('GET', `${o.base}/search?q=color`, { token: o.dsToken })).status).toBe(400);
  expect(
    (await gql(t.url, SEARCH, { o: 'meter1', q: 'price:1:2:3' }, o.dsToken)).errors,
  ).toBeDefined();
  expect(
    (await t.call('GET', `${o.base}/content/details?ids=i1`, { token: o.dsToken })).status,
  ).toBe(200);
  expect(
    (await t.call('GET', `${o.base}/content/fields?fields=color`, { token: o.dsToken })).status,
  ).toBe(200);
  // an engine failure after the charge is refunded (only 2xx responses count)
  const down = t.hosts
    .filter((h) => h.url)
    .map((h) =>
      jest
        .spyOn(h.container.ports.engine, 'search')
        .mockRejectedValue(new AppError('unavailable', 'engine down', undefined, 5)),
    );
  expect((await t.call('GET', `${o.base}/search`, { token: o.dsToken })).status).toBe(503);
  down.forEach((s) => s.mockRestore());

  const u = await usage(o);
  expect(u.datasets.cat.usage).toEqual([{ type: 'search', requests: 5, credits: 2.5 }]);
  expect(u.credits).toMatchObject({ limitType: 'unlimited', used: 2.5 });
  expect(u.requestCredits).toMatchObject({ search: 0.5, lens: 2 });
  // the time of the newest event counted, all of them made by this test
  expect(Date.parse(u.lastUpdated)).toBeGreaterThanOrEqual(started);
  expect(Date.parse(u.lastUpdated)).toBeLessThanOrEqual(t.clock.now());
});

/** Every API host's dataset reads by id take `ms` longer; `log` gets when each began and ended. */
function slowDatasetReads(ms: number, log: string[]) {
  return t.hosts
    .filter((h) => h.url)
    .flatMap((h) => {
      const { accounts, ledger } = h.container.ports;
      const read = accounts.getDatasetById.bind(accounts);
      const charge = ledger.charge.bind(ledger);
      const admit = ledger.admit.bind(ledger);
      return [
        jest.spyOn(accounts, 'getDatasetById').mockImplementation(async (id) => {
          log.push('read');
          await new Promise((r) => setTimeout(r, ms));
          log.push('read done');
          return read(id);
        }),
        jest.spyOn(ledger, 'charge').mockImplementation((c, limit) => {
          log.push(`charge ${c.type}`);
          return charge(c, limit);
        }),
        // a fixed package's charges (admitted, perhaps from credits set aside)
        jest.spyOn(ledger, 'admit').mockImplementation((c, limit) => {
          log.push(`charge ${c.type}`);
          return admit(c, limit);
        }),
      ];
    });
}

test('a charge starts before the dataset is read; a request failing after is refunded before it answers', async () => {
  const o = await publishedOrg('meterearly');
  const log: string[] = [];
  const spies = slowDatasetReads(150, log);
  try {
    expect((await t.call('GET', `${o.base}/search`, { token: o.dsToken })).status).toBe(200);
    // the shared counter's write overlaps the dataset read instead of following it
    expect(log).toEqual(['read', 'charge search', 'read done']);
    log.length = 0;
    const similar = await t.call('GET', `${o.base}/similar?id=i1`, { token: o.dsToken });
    expect(similar.status).toBe(200);
    expect(log.indexOf('charge similar')).toBeLessThan(log.indexOf('read done'));
    // charged early, then refused for a bad q, an unknown item and a bad sort: given back
    for (const path of ['search?q=color', 'similar?id=nope', 'search?sort=nope']) {
      const r = await t.call('GET', `${o.base}/${path}`, { token: o.dsToken });
      expect([path, r.status]).toEqual([path, path.startsWith('similar') ? 404 : 400]);
    }
    expect(log.filter((x) => x.startsWith('charge'))).toHaveLength(4);
  } finally {
    spies.forEach((s) => s.mockRestore());
  }
  const u = await usage(o);
  expect(u.credits.used).toBe(2);
  expect(u.datasets.cat.usage).toEqual([
    { type: 'search', requests: 1, credits: 1 },
    { type: 'similar', requests: 1, credits: 1 },
  ]);
});

test('a fixed package is charged only once a request is checked: a bad request never holds the last credit', async () => {
  const o = await publishedOrg('meterfixed', { credits: { limitType: 'fixed', limit: 1 } });
  const log: string[] = [];
  const spies = slowDatasetReads(150, log);
  try {
    // the bad request arrives first; were it charged before its check, the good one would see 402
    const bad = t.call('GET', `${o.base}/search?q=color`, { token: o.dsToken });
    await waitFor('the bad request reading its dataset', async () => log.includes('read'));
    const good = t.call('GET', `${o.base}/search`, { token: o.dsToken });
    expect([(await bad).status, (await good).status]).toEqual([400, 200]);
    expect(log.filter((x) => x.startsWith('charge'))).toEqual(['charge search']);
  } finally {
    spies.forEach((s) => s.mockRestore());
  }
  expect((await usage(o)).credits).toMatchObject({ used: 1, remaining: 0 });
});

test('a dataset still pending answers 409 and is not charged', async () => {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'meter2' } });
  const d = await t.call('POST', '/orgs/meter2/datasets', {
    token: o.body.token,
    body: { name: 'cat' },
  });
  const r = await t.call('GET', '/orgs/meter2/datasets/cat/search', {
    token: d.body.dataset.browse_token,
  });
  expect(r.status).toBe(409);
  const u = await t.call('GET', '/orgs/meter2/usage', { token: o.body.token });
  expect(u.body.usage.credits.used).toBe(0);
  expect(u.body.usage.datasets.cat.usage).toEqual([]);
});

test('a fixed package of R credits admits exactly R of many concurrent requests, on both transports', async () => {
  const R = 7;
  const o = await publishedOrg('meter3', { credits: { limitType: 'fixed', limit: R } });
  const calls = Array.from({ length: 24 }, (_, i) =>
    i % 2
      ? t.call('GET', `${o.base}/search`, { token: o.dsToken }).then((r) => r.status)
      : gql(t.url, SEARCH, { o: 'meter3' }, o.dsToken).then((r) =>
          r.errors ? r.errors[0]!.extensions.code : 200,
        ),
  );
  const outcomes = await Promise.all(calls);
  expect(outcomes.filter((x) => x === 200)).toHaveLength(R);
  expect(outcomes.filter((x) => x === 402 || x === 'payment_required')).toHaveLength(24 - R);
  const u = await usage(o);
  expect(u.credits).toEqual(
    expect.objectContaining({ limitType: 'fixed', limit: R, used: R, remaining: 0 }),
  );
  expect(u.datasets.cat.usage).toEqual([{ type: 'search', requests: R, credits: R }]);
  const refused = await t.call('GET', `${o.base}/search`, { token: o.dsToken });
  expect(refused.status).toBe(402);
  expect(refused.body.error.code).toBe('payment_required');
  // details stay free when the package is used up
  expect(
    (await t.call('GET', `${o.base}/content/details?ids=i1`, { token: o.dsToken })).status,
  ).toBe(200);
});

test('images count once per new url per item; re-posting the same url or redelivering does not', async () => {
  const o = await publishedOrg('meter4');
  const post = (content: unknown[]) =>
    t.call('POST', `${o.base}/content`, { token: o.orgToken, body: { content } });
  await post([{ id: 'i1', url: `${img.url}/img/1.png`, metadata: { color: 'pink' } }]); // same url
  await post([{ id: 'i2', url: `${img.url}/img/2.png?v=2` }]); // new query string
  await post([{ id: 'dup', url: `${img.url}/img/3.png` }]); // same url as i3, another id
  await post([{ id: 'bad', url: `${img.url}/missing.png` }]); // fails: not counted
  await waitProcessed(t, o.base, o.orgToken, READY + 2);
  const job = { datasetId: '', itemId: 'i2', url: `${img.url}/img/2.png?v=2`, attempt: 1 };
  const ds = await t.app.container.ports.accounts.getDataset('meter4', 'cat');
  await t.app.container.processImage.handle({ ...job, datasetId: ds!.id }); // a redelivery
  const u = await usage(o);
  expect(u.images).toMatchObject({
    processed: READY + 2,
    total: READY + 1,
    limitType: 'unlimited',
  });
  expect(u.datasets.cat.images).toBe(READY + 1);
});

test('usage survives a restart, and other months are separate', async () => {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'meter5' } });
  const token = o.body.token as string;
  const before = (await t.call('GET', '/orgs/meter1/usage', { token: OPERATOR })).status;
  expect(before).toBe(403); // the operator does not read usage; org tokens do
  const other = await t.call('GET', '/orgs/meter5/usage?year=2020&month=1', { token });
  expect(other.body.usage.credits).toMatchObject({ used: 0, month: 1, year: 2020 });

  const dataDir = t.dataDir;
  const meter1 = (await t.call('POST', '/orgs/meter1/tokens', { token: OPERATOR })).body.token;
  const was = (await t.call('GET', '/orgs/meter1/usage', { token: meter1 })).body.usage;
  await t.stop({ keep: true });
  t = await startTestApp({ WORKER_CONCURRENCY: '8' }, dataDir);
  const now = (await t.call('GET', '/orgs/meter1/usage', { token: meter1 })).body.usage;
  expect(now.credits).toEqual(was.credits);
  expect(now.datasets.cat.usage).toEqual(was.datasets.cat.usage);
  expect(now.images.processed).toBe(was.images.processed);
});

test('a fixed yearly image limit postpones the rest (quota_postponed) until the limit is raised', async () => {
  const o = await t.call('POST', '/orgs', {
    token: OPERATOR,
    body: { name: 'meter6', plan: { images: { limitType: 'fixed', limit: 5 } } },
  });
  const orgToken = o.body.token as string;
  await t.call('POST', '/orgs/meter6/datasets', { token: orgToken, body: { name: 'cat' } });
  const base = '/orgs/meter6/datasets/cat';
  const content = Array.from({ length: 8 }, (_, i) => ({
    id: `p${i}`,
    url: `${img.url}/img/${i}.png`,
  }));
  await t.call('POST', `${base}/content`, { token: orgToken, body: { content } });
  // eight images at once on eight worker slots: the reservation keeps it at exactly five
  const errors = await waitFor('five processed and three postponed items', async () => {
    const r = await t.call('GET', `${base}/errors`, { token: orgToken });
    const d = await t.call('GET', base, { token: orgToken });
    return d.body.dataset.counts.processed === 5 && r.body.total_results === 3 && r.body.errors;
  });
  expect(errors.map((e: { code: string }) => e.code)).toEqual(Array(3).fill('quota_postponed'));
  const ds = (await t.call('GET', base, { token: orgToken })).body.dataset;
  expect(ds.counts).toMatchObject({ items: 8, processed: 5, pending: 3 });
  const u = (await t.call('GET', '/orgs/meter6/usage', { token: orgToken })).body.usage;
  expect(u.images).toMatchObject({ limitType: 'fixed', limit: 5, processed: 5, remaining: 0 });

  const raised = await t.call('PUT', '/orgs/meter6/plan', {
    token: OPERATOR,
    body: { plan: { images: { limitType: 'fixed', limit: 10 } } },
  });
  expect(raised.status).toBe(200);
  expect(
    (await t.call('PUT', '/orgs/meter6/plan', { token: orgToken, body: { plan: {} } })).status,
  ).toBe(403);
  // what the worker's periodic recovery sweep does
  await requeueUnfinished(
    t.app.container.ports.content,
    t.app.container.ports.queue,
    t.app.container.log,
    t.app.container.embedder.id,
  );
  await waitProcessed(t, base, orgToken, 8);
  const after = (await t.call('GET', base, { token: orgToken })).body.dataset.counts;
  expect(after).toEqual({ items: 8, processed: 8, pending: 0, errors: 0 });
  const u2 = (await t.call('GET', '/orgs/meter6/usage', { token: orgToken })).body.usage;
  expect(u2.images).toMatchObject({ processed: 8, remaining: 2 });
});

interface StoredState {
  organisation: {
    dataset: { item: { state: string; image: { url: string } | null } | null };
  };
}

describe('image counting through the worker (contract §8: a new url is one counted from anew)', () => {
  /** An organisation with an empty dataset `cat`; its token and the dataset's path. */
  async function orgWithDataset(name: string, plan?: unknown) {
    const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name, plan } });
    expect(o.status).toBe(201);
    const token = o.body.token as string;
    expect(
      (await t.call('POST', `/orgs/${name}/datasets`, { token, body: { name: 'cat' } })).status,
    ).toBe(201);
    const base = `/orgs/${name}/datasets/cat`;
    const push = async (id: string, url: string) =>
      expect(
        (await t.call('POST', `${base}/content`, { token, body: { content: [{ id, url }] } }))
          .status,
      ).toBe(202);
    const images = async () =>
      (await t.call('GET', `/orgs/${name}/usage`, { token })).body.usage.images as {
        processed: number;
        remaining?: number;
      };
    /** Waits until the item is processed from `url` (the worker, not the write, did it). */
    const processedFrom = (id: string, url: string) =>
      waitFor(`${id} processed from ${url}`, async () => {
        const r = await gql<StoredState, { o: string; id: string }>(
          t.url,
          `query I($o: String!, $id: ID!) { organisation(name: $o) { dataset(name: "cat") {
             item(id: $id) { state image { url } } } } }`,
          { o: name, id },
          token,
        );
        const item = r.data?.organisation.dataset.item;
        return item?.state === 'PROCESSED' && item.image?.url === url;
      });
    return { token, base, push, images, processedFrom };
  }

  const A = () => `${img.url}/img/41.png`;
  const B = () => `${img.url}/img/42.png`;

  test('an item deleted and pushed again with the same url counts again once processed', async () => {
    const o = await orgWithDataset('meter7');
    await o.push('x', A());
    await o.processedFrom('x', A());
    expect((await o.images()).processed).toBe(1);
    const del = await t.call('DELETE', `${o.base}/content`, {
      token: o.token,
      body: { ids: ['x'] },
    });
    expect(del.status).toBe(202);
    await waitFor('x deleted', async () => {
      const d = await t.call('GET', o.base, { token: o.token });
      return d.body.dataset.counts.items === 0;
    });
    expect((await o.images()).processed).toBe(1); // deleting is not processing
    await o.push('x', A());
    await o.processedFrom('x', A());
    await waitFor('the second processing counted', async () => (await o.images()).processed === 2);
  });

  test('A → B → A counts three times; re-sending the current url counts nothing', async () => {
    const o = await orgWithDataset('meter8');
    const steps: Array<[string, number]> = [
      [A(), 1],
      [B(), 2],
      [B(), 2], // same url again: nothing to process
      [A(), 3],
    ];
    for (const [url, count] of steps) {
      await o.push('y', url);
      await o.processedFrom('y', url);
      await waitFor(`${count} images counted`, async () => (await o.images()).processed === count);
    }
    // nothing more arrives late: every job has been handled, and the item is processed, so no
    // sweep queues it again
    await queueDrained();
    expect((await o.images()).processed).toBe(3);
  });

  test('with a fixed limit, A → B → A cannot pass it: the url change waits as quota_postponed', async () => {
    const o = await orgWithDataset('meter9', { images: { limitType: 'fixed', limit: 2 } });
    await o.push('z', A());
    await o.processedFrom('z', A());
    await o.push('z', B());
    await o.processedFrom('z', B());
    expect(await o.images()).toMatchObject({ processed: 2, remaining: 0 });
    await o.push('z', A());
    const errors = await waitFor('the third url postponed', async () => {
      const r = await t.call('GET', `${o.base}/errors`, { token: o.token });
      return r.body.total_results === 1 && r.body.errors;
    });
    expect(errors).toEqual([
      expect.objectContaining({ id: 'z', url: A(), code: 'quota_postponed' }),
    ]);
    const ds = (await t.call('GET', o.base, { token: o.token })).body.dataset;
    expect(ds.counts).toMatchObject({ items: 1, processed: 0, pending: 1 });
    const listed = await t.call('GET', `${o.base}/content`, { token: o.token });
    expect(listed.body.content).toEqual([{ id: 'z', url: A(), processed: false }]);
    expect(await o.images()).toMatchObject({ processed: 2, remaining: 0 });

    // raised by one, the waiting url is processed and is the third image
    const raised = await t.call('PUT', '/orgs/meter9/plan', {
      token: OPERATOR,
      body: { plan: { images: { limitType: 'fixed', limit: 3 } } },
    });
    expect(raised.status).toBe(200);
    await requeueUnfinished(
      t.app.container.ports.content,
      t.app.container.ports.queue,
      t.app.container.log,
      t.app.container.embedder.id,
    );
    await o.processedFrom('z', A());
    await waitFor('the third image counted', async () => (await o.images()).processed === 3);
    expect(await o.images()).toMatchObject({ processed: 3, remaining: 0 });
  });
});

test('datasets named like object internals are listed in usage like any other', async () => {
  const o = await t.call('POST', '/orgs', { token: OPERATOR, body: { name: 'meterprotos' } });
  const org = { name: 'meterprotos', orgToken: o.body.token, dsToken: '', base: '' };
  for (const name of ['__proto__', 'constructor', 'toString']) {
    const d = await t.call('POST', `/orgs/${org.name}/datasets`, {
      token: org.orgToken,
      body: { name },
    });
    expect([name, d.status]).toEqual([name, 201]);
  }
  const u = await usage(org);
  expect(Object.keys(u.datasets).sort()).toEqual(['__proto__', 'constructor', 'toString']);
  expect(u.datasets.constructor).toMatchObject({ images: 0, usage: [] });
});
