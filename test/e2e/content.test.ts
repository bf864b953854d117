import { SEARCH_BACKEND, setupDataset, startTestApp, waitFor, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp();
  ds = await setupDataset(t);
});
afterAll(async () => {
  await t.stop();
  await img.close();
});

const post = (content: unknown[]) =>
  t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
const put = (content: unknown[]) =>
  t.call('PUT', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
const details = (ids: string, fields = '*') =>
  t.call(
    'GET',
    `${ds.base}/content/details?ids=${encodeURIComponent(ids)}&fields=${encodeURIComponent(fields)}`,
    { token: ds.dsToken },
  );
const listed = async () =>
  (await t.call('GET', `${ds.base}/content`, { token: ds.orgToken })).body.content as Array<{
    id: string;
    url: string;
    processed: boolean;
  }>;
const processed = (id: string) =>
  waitFor(`${id} processed`, async () => (await details(id)).body.results[0]);
/** Every job queued so far has been handled: none waits, is delayed or runs, on any process. */
const queueDrained = () =>
  waitFor('the job queue drained', async () => {
    const stats = await Promise.all(t.hosts.map((h) => h.container.ports.queue.stats()));
    return stats.every((s) => s.ready + s.delayed + s.running === 0);
  });
const errorOf = (id: string) =>
  waitFor(`${id} failed`, async () => {
    const r = await t.call('GET', `${ds.base}/errors`, { token: ds.orgToken });
    return r.body.errors.find((e: { id: string }) => e.id === id);
  });

describe('writing content', () => {
  it('accepts with 202, lists at once as unprocessed, then processes the image', async () => {
    const r = await post([
      {
        id: 'p1',
        url: `${img.url}/img/1.png`,
        metadata: { title: 'Red shoe', price: 10 },
        privateMetadata: { cost: 4 },
      },
    ]);
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ status: 'accepted' });
    const entry = (await listed()).find((e) => e.id === 'p1');
    expect(entry).toMatchObject({ id: 'p1', url: `${img.url}/img/1.png` });
    const item = await processed('p1');
    expect(item).toEqual({
      id: 'p1',
      explore_url: `${t.url}${ds.base}/explore?id=p1&fields=*`,
      metadata: {
        title: 'Red shoe',
        price: 10,
        image_width: 48,
        image_height: 48,
        image_url: `${img.url}/img/1.png`,
        service_created_at: expect.any(String),
        service_updated_at: expect.any(String),
        // contract §14: no events yet
        service_popularity: 0,
        service_purchases: 0,
      },
    });
    expect((await listed()).find((e) => e.id === 'p1')!.processed).toBe(true);
  });

  it('returns only the requested fields, never privateMetadata', async () => {
    await processed('p1');
    expect((await details('p1', 'price,cost,image_width')).body.results[0].metadata).toEqual({
      price: 10,
      image_width: 48,
    });
    expect((await details('p1', '')).body.results[0].metadata).toEqual({});
    expect(JSON.stringify((await details('p1', '*')).body)).not.toContain('cost');
  });

  it('details: unique, found items only, in the order asked', async () => {
    await post([{ id: 'p2', url: `${img.url}/img/2.jpg` }]);
    await processed('p2');
    const r = await details('p2,unknown,p1,p2', 'price');
    expect(r.body.results.map((x: { id: string }) => x.id)).toEqual(['p2', 'p1']);
    expect((await t.call('GET', `${ds.base}/content/details`, { token: ds.dsToken })).status).toBe(
      400,
    );
  });

  it('POST replaces metadata wholesale; PUT merges it; neither re-downloads an unchanged url', async () => {
    await post([{ id: 'm1', url: `${img.url}/img/11.png`, metadata: { a: 1, b: 'x' } }]);
    await processed('m1');
    const hits = img.hits.get('/img/11.png');
    await post([{ id: 'm1', url: `${img.url}/img/11.png`, metadata: { c: true } }]);
    expect((await details('m1', 'a,b,c')).body.results[0].metadata).toEqual({ c: true });
    await put([{ id: 'm1', metadata: { a: 2, c: null } }]);
    expect((await details('m1', 'a,b,c')).body.results[0].metadata).toEqual({ a: 2 });
    await post([{ id: 'm1', url: `${img.url}/img/11.png` }]);
    expect((await details('m1', 'a')).body.results[0].metadata).toEqual({ a: 2 });
    // a job these writes queued would have fetched the image by the time it was handled
    await queueDrained();
    expect(img.hits.get('/img/11.png')).toBe(hits);
  });

  it('re-processes when the url changes, including only its query string', async () => {
    await post([{ id: 'u1', url: `${img.url}/img/21.png` }]);
    await processed('u1');
    await put([{ id: 'u1', url: `${img.url}/img/21.png?v=2` }]);
    expect((await listed()).find((e) => e.id === 'u1')!.processed).toBe(false);
    await waitFor('reprocessed', async () =>
      (await details('u1', 'image_url')).body.results[0]?.metadata.image_url?.endsWith('?v=2'),
    );
    expect(img.hits.get('/img/21.png')).toBe(2);
  });

  it('PUT on an unknown id is refused and stores nothing', async () => {
    const r = await put([
      { id: 'm1', metadata: { z: 1 } },
      { id: 'ghost', metadata: { a: 1 } },
    ]);
    expect(r.status).toBe(400);
    expect(r.body.error.details).toEqual([
      { index: 1, id: 'ghost', field: 'id', message: expect.stringContaining('POST') },
    ]);
    expect((await details('m1', 'z')).body.results[0].metadata).toEqual({});
  });

  it('a batch with bad items is refused whole, every problem named', async () => {
    const r = await post([
      { id: 'good-1', url: `${img.url}/img/31.png` },
      { id: 'x'.repeat(101), url: `${img.url}/img/32.png` },
      { id: 'bad-url', url: 'file:///etc/passwd' },
      { id: 'no-url' },
    ]);
    expect(r.status).toBe(400);
    expect(
      r.body.error.details.map((d: { index: number; field: string }) => [d.index, d.field]),
    ).toEqual([
      [1, 'id'],
      [2, 'url'],
      [3, 'url'],
    ]);
    expect((await listed()).map((e) => e.id)).not.toContain('good-1');
  });

  it('lists in code-point id order with limit and offset', async () => {
    await post(
      ['b', 'A', 'a', 'é', 'Z', '10', '9'].map((id) => ({
        id: `o-${id}`,
        url: `${img.url}/img/40.png`,
      })),
    );
    const all = (await listed()).map((e) => e.id).filter((id) => id.startsWith('o-'));
    expect(all).toEqual(['o-10', 'o-9', 'o-A', 'o-Z', 'o-a', 'o-b', 'o-é']);
    const everything = (await listed()).map((e) => e.id);
    const page = await t.call('GET', `${ds.base}/content?limit=2&offset=3`, { token: ds.orgToken });
    expect(page.body.content.map((e: { id: string }) => e.id)).toEqual(everything.slice(3, 5));
    for (const q of ['limit=0', 'limit=1001', 'offset=-1', 'limit=abc']) {
      const bad = await t.call('GET', `${ds.base}/content?${q}`, { token: ds.orgToken });
      expect(bad.status).toBe(400);
      expect(bad.body.error.details[0].param).toBe(q.split('=')[0]);
    }
  });

  it('DELETE removes items (unknown ids ignored) and their errors', async () => {
    await post([
      { id: 'd1', url: `${img.url}/img/50.png` },
      { id: 'd2', url: `${img.url}/missing.png` },
    ]);
    await processed('d1');
    await errorOf('d2');
    const r = await t.call('DELETE', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { ids: ['d1', 'd2', 'never'] },
    });
    expect(r.status).toBe(202);
    expect((await details('d1')).body.results).toEqual([]);
    expect((await listed()).map((e) => e.id)).not.toContain('d1');
    const errs = await t.call('GET', `${ds.base}/errors`, { token: ds.orgToken });
    expect(errs.body.errors.map((e: { id: string }) => e.id)).not.toContain('d2');
  });
});

describe('processing failures', () => {
  it.each([
    ['missing', '/missing.png', 'not_found'],
    ['gif', '/gif/1.png', 'unsupported_format'],
    ['corrupt', '/corrupt.png', 'invalid_image'],
  ])('%s → %s', async (id, path, code) => {
    await post([{ id: `f-${id}`, url: `${img.url}${path}` }]);
    const e = await errorOf(`f-${id}`);
    expect(e).toMatchObject({
      id: `f-${id}`,
      url: `${img.url}${path}`,
      code,
      attempts: 1,
      occurred_at: expect.any(String),
    });
    expect(e.message.length).toBeGreaterThan(5);
    expect((await details(`f-${id}`)).body.results).toEqual([]);
  });

  it('accepts extension-less urls and decides the format from the bytes', async () => {
    await post([{ id: 'noext', url: `${img.url}/noext/7` }]);
    expect((await processed('noext')).metadata.image_width).toBe(48);
  });

  it('retries transient failures and succeeds', async () => {
    img.failuresLeft.set('/flaky/60.png', 2);
    await post([{ id: 'flaky', url: `${img.url}/flaky/60.png` }]);
    await processed('flaky');
    expect(img.hits.get('/flaky/60.png')).toBe(3);
  });

  it('records a transient failure after 3 retries, then clears it when the url is fixed', async () => {
    img.failuresLeft.set('/flaky/61.png', 100);
    await post([{ id: 'down', url: `${img.url}/flaky/61.png` }]);
    const e = await errorOf('down');
    expect(e).toMatchObject({ code: 'download_failed', attempts: 4 });
    expect(img.hits.get('/flaky/61.png')).toBe(4);
    await put([{ id: 'down', url: `${img.url}/img/61.png` }]);
    await processed('down');
    const errs = await t.call('GET', `${ds.base}/errors`, { token: ds.orgToken });
    expect(errs.body.errors.map((x: { id: string }) => x.id)).not.toContain('down');
  });

  it('counts items, processed, pending and errors on the dataset', async () => {
    const r = await t.call('GET', ds.base, { token: ds.orgToken });
    const c = r.body.dataset.counts;
    expect(c.items).toBe((await listed()).length);
    expect(c.processed + c.pending + c.errors).toBe(c.items);
  });
});

describe('image safety with private addresses refused', () => {
  it('refuses loopback sources (forbidden_address), without retrying', async () => {
    const strict = await startTestApp({ IMAGE_FETCH_ALLOW_PRIVATE: 'false' });
    try {
      const s = await setupDataset(strict, 'strict', 'd');
      await strict.call('POST', `${s.base}/content`, {
        token: s.orgToken,
        body: {
          content: [
            { id: 'lo', url: `${img.url}/img/1.png` },
            { id: 'meta', url: 'http://169.254.169.254/latest.png' },
          ],
        },
      });
      const errs = await waitFor('both refused', async () => {
        const r = await strict.call('GET', `${s.base}/errors`, { token: s.orgToken });
        return r.body.total_results === 2 && r.body.errors;
      });
      expect(errs.map((e: { code: string; attempts: number }) => [e.code, e.attempts])).toEqual([
        ['forbidden_address', 1],
        ['forbidden_address', 1],
      ]);
    } finally {
      await strict.stop();
    }
  });
});

const onElasticsearch = SEARCH_BACKEND === 'elasticsearch' ? describe : describe.skip;
onElasticsearch('a write Elasticsearch refuses half-way', () => {
  it('answers 503, still processes what it wrote, and the same request sent again finishes the rest', async () => {
    const { config } = t.app.container;
    const dataset = await t.app.container.ports.accounts.getDataset('acme', 'shoes');
    const index = `${config.ES_INDEX_PREFIX}items-${dataset!.id}`;
    const settings = async (limit: number) => {
      const r = await fetch(`${config.ELASTICSEARCH_URL[0]}/${index}/_settings`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ 'index.mapping.nested_objects.limit': limit }),
      });
      expect(r.ok).toBe(true);
    };
    // the dataset's item index exists once it holds an item
    expect((await post([{ id: 'half-seed', url: `${img.url}/img/70.png` }])).status).toBe(202);
    // Each metadata value is a nested document (and so is each generated field once processed):
    // past the limit the engine refuses that item alone, as a real cluster refuses some items
    // of a bulk.
    await settings(6);
    const many = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, i]));
    const content = [
      { id: 'half-1', url: `${img.url}/img/71.png`, metadata: { k: 1 } },
      { id: 'half-big', url: `${img.url}/img/72.png`, metadata: many },
      { id: 'half-2', url: `${img.url}/img/73.png`, metadata: { k: 2 } },
    ];
    try {
      const r = await post(content);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('unavailable');
      // written without waiting for any sweep: their jobs were queued with the 503
      await processed('half-1');
      await processed('half-2');
    } finally {
      await settings(10_000);
    }
    expect((await post(content)).status).toBe(202);
    await processed('half-big');
  });
});
