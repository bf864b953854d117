/**
 * similar, explore and lens (contract §7) end to end, with real images: identical images must
 * come back first, filters apply inside the search, and every call is metered.
 */
import { ExploreDocument, LensDocument, SimilarDocument } from '../graphql/generated';
import { startTestApp, setupDataset, waitProcessed, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
const N = 210;
/** Items t1–t3 show the same picture as item s-005. */
const TWINS = ['t1', 't2', 't3'];

const get = (path: string) => t.call('GET', `${ds.base}/${path}`, { token: ds.dsToken });
const ids = (r: { body: { results: Array<{ id: string }> } }) => r.body.results.map((x) => x.id);

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'simorg', 'pics');
  const content = Array.from({ length: N }, (_, i) => ({
    id: `s-${String(i).padStart(3, '0')}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { half: i % 2 ? 'odd' : 'even', parent: `p${Math.floor(i / 3)}`, n: i },
  }));
  content.push(
    ...TWINS.map((id, k) => ({
      id,
      url: `${img.url}/img/5.png?copy=${k}`,
      metadata: { half: k === 2 ? 'even' : 'odd', parent: k === 0 ? 'p1' : 'px', n: 1000 + k },
    })),
  );
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, content.length);
}, 120_000);

afterAll(async () => {
  await t.stop();
  await img.close();
});

describe('similar', () => {
  test('the item first, then identical pictures, scores 0–1 decreasing', async () => {
    const r = await get('similar?id=s-005&limit=6&fields=n');
    expect(r.status).toBe(200);
    expect(r.body.results).toHaveLength(6);
    expect(r.body.results[0]).toMatchObject({ id: 's-005', score: 1, metadata: { n: 5 } });
    expect(ids(r).slice(1, 4).sort()).toEqual(TWINS);
    const scores = r.body.results.map((x: { score: number }) => x.score);
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeLessThanOrEqual(scores[i - 1]);
    expect(scores[1]).toBeGreaterThan(0.999);
    for (const s of scores) expect(s).toBeLessThanOrEqual(1);
    expect(scores[5]).toBeLessThan(0.999);
    expect(r.body.results[1].explore_url).toContain(`${ds.base}/explore?id=`);
    expect(r.body.results[1].explore_url).toContain('fields=n');
  });

  test('q filters inside the search: a full page of matching items', async () => {
    const r = await get('similar?id=s-005&limit=10&q=half:even&fields=half');
    expect(r.body.results).toHaveLength(10);
    expect(ids(r)[0]).toBe('s-005'); // the target leads even though it is odd
    expect(ids(r)[1]).toBe('t3'); // the only even twin
    for (const x of r.body.results.slice(1)) expect(x.metadata.half).toBe('even');
  });

  test('exclude_parent drops items sharing the target parent', async () => {
    // s-005 has parent p1, as do s-003, s-004 and t1
    const r = await get('similar?id=s-005&limit=50&exclude_parent=true&fields=parent');
    const rest = r.body.results.slice(1);
    expect(rest.length).toBe(49);
    expect(rest.map((x: { metadata: { parent: string } }) => x.metadata.parent)).not.toContain(
      'p1',
    );
    expect(ids(r)).not.toContain('t1');
    expect(ids(r)).toContain('t2');
  });

  test('client mistakes are precise 4xx', async () => {
    expect((await get('similar?id=nope')).status).toBe(404);
    const noId = await get('similar');
    expect(noId.status).toBe(400);
    expect(noId.body.error.details[0].param).toBe('id');
    expect((await get('similar?id=s-005&limit=51')).status).toBe(400);
    expect((await get('similar?id=s-005&exclude_parent=yes')).body.error.details[0].param).toBe(
      'exclude_parent',
    );
    expect((await get('similar?id=s-005&q=half')).status).toBe(400);
  });
});

describe('explore', () => {
  test('without id: a random selection honouring q', async () => {
    const a = await get('explore?limit=20&q=half:odd&fields=half');
    expect(a.status).toBe(200);
    expect(a.body.results).toHaveLength(20);
    for (const x of a.body.results) expect(x.metadata.half).toBe('odd');
    const b = await get('explore?limit=20&q=half:odd');
    expect(ids(a)).not.toEqual(ids(b));
  });

  test('with id: the next step, carried on by following explore_url', async () => {
    const first = await get('explore?id=s-005&limit=8&fields=n');
    expect(first.status).toBe(200);
    expect(first.body.results).toHaveLength(8);
    expect(ids(first)).not.toContain('s-005');
    // copies of the selected picture would be no step at all: diversification keeps them off
    for (const twin of TWINS) expect(ids(first)).not.toContain(twin);
    const next = first.body.results[3] as { id: string; explore_url: string };
    expect(next.explore_url).toContain('path=s-005');
    const url = new URL(next.explore_url);
    const second = await t.call('GET', url.pathname + url.search, { token: ds.dsToken });
    expect(second.status).toBe(200);
    expect(second.body.results).toHaveLength(8);
    expect(ids(second)).not.toContain('s-005');
    expect(ids(second)).not.toContain(next.id);
    expect(second.body.results[0].explore_url).toContain(`path=s-005%2C${next.id}`);
  });
});

describe('lens', () => {
  const lens = (body: unknown, qs = '', raw?: string) =>
    t.call('POST', `${ds.base}/search${qs}`, {
      token: ds.dsToken,
      ...(raw !== undefined ? { raw, headers: { 'content-type': 'application/json' } } : { body }),
    });

  test('an uploaded copy of a picture finds it and its twins', async () => {
    const png = await makeImage(5);
    const r = await lens({ image: `data:image/png;base64,${png.toString('base64')}` }, '?limit=5');
    expect(r.status).toBe(200);
    expect(ids(r).slice(0, 4).sort()).toEqual(['s-005', ...TWINS].sort());
    expect(r.body.results[0].score).toBeGreaterThan(0.999);
    const jpeg = await makeImage(5, 'jpeg');
    const j = await lens(
      { image: `data:image/jpeg;base64,${jpeg.toString('base64')}` },
      '?q=half:even&limit=3',
    );
    expect(ids(j)[0]).toBe('t3');
  });

  test('bad images are 400, big bodies 413', async () => {
    expect((await lens({ image: 'http://example.com/x.png' })).status).toBe(400);
    const gif = Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1').toString('base64');
    const r = await lens({ image: `data:image/png;base64,${gif}` });
    expect(r.status).toBe(400);
    expect(r.body.error.details[0].field).toBe('image');
    const big = JSON.stringify({ image: `data:image/png;base64,${'A'.repeat(520 * 1024)}` });
    const tooBig = await lens(undefined, '', big);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error.code).toBe('payload_too_large');
  });
});

describe('collection (contract §11)', () => {
  test('items in the style of the group, the group excluded, best first', async () => {
    const r = await get('collection?ids=t1,t2&limit=4&fields=n');
    expect(r.status).toBe(200);
    expect(r.body.results).toHaveLength(4);
    // t1 and t2 show picture 5: its other copies lead, the group itself never appears
    expect(ids(r).slice(0, 2).sort()).toEqual(['s-005', 't3']);
    expect(ids(r)).not.toContain('t1');
    expect(r.body.results[0].score).toBeGreaterThan(0.999);
    const scores = r.body.results.map((x: { score: number }) => x.score);
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeLessThanOrEqual(scores[i - 1]);
    const filtered = await get('collection?ids=t1,t2&limit=5&q=half:odd&fields=half');
    expect(filtered.body.results).toHaveLength(5);
    for (const x of filtered.body.results) expect(x.metadata.half).toBe('odd');
    expect(ids(filtered)).not.toContain('t3'); // even
  });

  test('unknown ids are a 404 naming them; no ids or more than 50 a 400', async () => {
    const unknown = await get('collection?ids=t1,nope-1,nope-2');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain('nope-1');
    expect(unknown.body.error.details.map((d: { id: string }) => d.id)).toEqual([
      'nope-1',
      'nope-2',
    ]);
    expect((await get('collection')).status).toBe(400);
    const many = Array.from({ length: 51 }, (_, i) => `s-${String(i).padStart(3, '0')}`);
    const tooMany = await get(`collection?ids=${many.join(',')}`);
    expect([tooMany.status, tooMany.body.error.details[0].param]).toEqual([400, 'ids']);
  });

  test('GraphQL answers what REST answers', async () => {
    const g = await gql<{ vision: { collection: Array<{ id: string; score: number }> } }, object>(
      t.url,
      `query { vision(organisation: "simorg", dataset: "pics") {
         collection(ids: ["t1", "t2"], limit: 4) { id score } } }`,
      {},
      ds.dsToken,
    );
    expect(g.errors).toBeUndefined();
    const rest = await get('collection?ids=t1,t2&limit=4');
    expect(g.data!.vision.collection.map((x) => x.id)).toEqual(ids(rest));
  });
});

test('similar, explore and lens are metered with their own credits', async () => {
  await t.chargesRecorded();
  const usage = await t.call('GET', '/orgs/simorg/usage', { token: ds.orgToken });
  const lines = Object.fromEntries(
    usage.body.usage.datasets.pics.usage.map((u: { type: string }) => [u.type, u]),
  );
  expect(lines.similar).toMatchObject({ requests: 3 }); // the 4xx ones are free
  expect(lines.explore).toMatchObject({ requests: 4 });
  expect(lines.lens).toMatchObject({ requests: 2, credits: 4 });
  expect(lines.collection).toMatchObject({ requests: 4, credits: 4 }); // 1 each (§11)
});

describe('GraphQL', () => {
  const vars = () => ({ organisation: 'simorg', dataset: 'pics' });

  test('similar, explore and lens answer what REST answers', async () => {
    const g = await gql(
      t.url,
      SimilarDocument,
      { ...vars(), id: 's-005', limit: 6, q: 'half:even' },
      ds.dsToken,
    );
    expect(g.errors).toBeUndefined();
    const rest = await get('similar?id=s-005&limit=6&q=half:even');
    const items = g.data!.vision.similar;
    expect(items.map((x) => x.id)).toEqual(ids(rest));
    expect(items.map((x) => x.score)).toEqual(
      rest.body.results.map((x: { score: number }) => x.score),
    );
    expect(items[0]).toMatchObject({ id: 's-005', score: 1, n: 5 });

    const e = await gql(
      t.url,
      ExploreDocument,
      { ...vars(), id: 't1', path: ['s-005'], limit: 5 },
      ds.dsToken,
    );
    const steps = e.data!.vision.explore;
    expect(steps).toHaveLength(5);
    expect(steps.map((x) => x.id)).not.toContain('s-005');
    expect(steps[0]!.exploreUrl).toContain('path=s-005%2Ct1');

    const png = await makeImage(5);
    const l = await gql(
      t.url,
      LensDocument,
      { ...vars(), image: `data:image/png;base64,${png.toString('base64')}`, limit: 4 },
      ds.dsToken,
    );
    expect(l.data!.vision.lens.map((x) => x.id).sort()).toEqual(['s-005', ...TWINS].sort());
    const big = await gql(
      t.url,
      LensDocument,
      { ...vars(), image: `data:image/png;base64,${'A'.repeat(520 * 1024)}` },
      ds.dsToken,
    );
    expect(onlyError(big).extensions.code).toBe('payload_too_large');
  });
});
