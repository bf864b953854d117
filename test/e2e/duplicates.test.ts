/**
 * @jest-environment ./test/setup/native-typed-arrays-env.js
 */
/**
 * The near-duplicate report (contract §18) through the whole service, on whichever engine the
 * project runs, with the default embedder (the hybrid) and its default max_distance: the same
 * picture under three ids and urls is one exact group; an 80 % crop, a JPEG at quality 40 and a
 * half-size copy of a photo are one near group with it; other products of its category are in
 * no group; dismissals hold through a full recomputation; deleted items leave their groups.
 */
import { hybridId } from '../../src/adapters/embedders';
import { defaultMaxDistance } from '../../src/domain/duplicates';
import { DatasetDuplicatesDocument } from '../graphql/generated';
import { gql } from '../helpers/graphql';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { photoVariants, productPhoto } from '../helpers/product-photos';

interface Group {
  id: string;
  kind: 'exact' | 'near';
  items: Array<{ id: string; distance: number }>;
}
interface Report {
  status: string;
  computed_at: string | null;
  pending: boolean;
  groups: Group[];
  next_cursor: string | null;
}

let img: ImageServer;
let t: TestApp;
let ds: Awaited<ReturnType<typeof setupDataset>>;
/** Other bottles: products of the photo's category. */
const OTHERS = ['bottle-2', 'bottle-3', 'bottle-4', 'bottle-5', 'bottle-6'];

const report = async (query = ''): Promise<Report> => {
  const r = await t.call<Report>('GET', `${ds.base}/duplicates${query}`, { token: ds.orgToken });
  expect(r.status).toBe(200);
  return r.body;
};
const ids = (g: Group): string[] => g.items.map((i) => i.id).sort();
/** A report that includes everything processed up to now (a pass after the last processing). */
const settled = async (query = ''): Promise<Report> =>
  waitFor(
    'a settled duplicate report',
    async () => {
      const r = await report(query);
      return !r.pending && r.computed_at !== null && r;
    },
    60_000,
  );

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ EMBEDDER: 'hybrid', DUPLICATE_REPORT: 'on', DUPLICATE_PASS_MS: '200' });
  ds = await setupDataset(t, 'dups', 'catalogue');
  const photo = await productPhoto('bottle', 1);
  const v = await photoVariants(photo);
  const same = await productPhoto('bowl', 9);
  for (const [name, bytes] of Object.entries({
    photo,
    crop: v.crop,
    q40: v.q40,
    half: v.half,
    'same-a': same,
    'same-b': same,
    'same-c': same,
  }))
    img.files.set(`${name}.jpg`, bytes);
  for (let s = 2; s <= 6; s++) img.files.set(`bottle-${s}.jpg`, await productPhoto('bottle', s));
  const content = [
    { id: 'p', url: `${img.url}/file/photo.jpg` },
    { id: 'p-crop', url: `${img.url}/file/crop.jpg` },
    // two copies filed as variants of one product
    { id: 'p-q40', url: `${img.url}/file/q40.jpg`, metadata: { parent: 'sku-9' } },
    { id: 'p-half', url: `${img.url}/file/half.jpg`, metadata: { parent: 'sku-9' } },
    // one picture under three ids and urls
    { id: 'x1', url: `${img.url}/file/same-a.jpg` },
    { id: 'x2', url: `${img.url}/file/same-b.jpg?copy=2` },
    { id: 'x3', url: `${img.url}/file/same-c.jpg` },
    ...OTHERS.map((id) => ({ id, url: `${img.url}/file/${id}.jpg` })),
  ];
  const r = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, content.length, 120_000);
}, 180_000);

afterAll(async () => {
  await t?.stop();
  await img?.close();
});

test('exact and near groups at the default distance; other products in none', async () => {
  const r = await settled();
  expect(r.status).toBe('ok');
  expect(r.groups.map((g) => [g.kind, ids(g)])).toEqual([
    ['near', ['p', 'p-crop', 'p-half', 'p-q40']],
    ['exact', ['x1', 'x2', 'x3']],
  ]);
  const [near, exact] = r.groups as [Group, Group];
  expect(exact.items).toEqual([
    { id: 'x1', distance: 0 },
    { id: 'x2', distance: 0 },
    { id: 'x3', distance: 0 },
  ]);
  expect(near.items[0]).toEqual({ id: 'p', distance: 0 });
  const limit = defaultMaxDistance(hybridId());
  for (const m of near.items.slice(1)) {
    expect(m.distance).toBeGreaterThan(0);
    expect(m.distance).toBeLessThanOrEqual(limit);
  }
  // distances ascend after the first item
  const ds2 = near.items.slice(1).map((m) => m.distance);
  expect(ds2).toEqual([...ds2].sort((a, b) => a - b));
  expect(new Date(r.computed_at!).getTime()).toBeGreaterThan(0);
  expect(r.next_cursor).toBeNull();

  // kind=near alone: the exact copies are a near group at distance 0
  const nearOnly = await report('?kind=near');
  expect(nearOnly.groups.map((g) => [g.kind, ids(g)])).toEqual([
    ['near', ['p', 'p-crop', 'p-half', 'p-q40']],
    ['near', ['x1', 'x2', 'x3']],
  ]);
  expect(nearOnly.groups[1]!.items.every((i) => i.distance === 0)).toBe(true);
  const exactOnly = await report('?kind=exact');
  expect(exactOnly.groups.map(ids)).toEqual([['x1', 'x2', 'x3']]);
  // a smaller max_distance filters the stored pairs: fewer copies join
  const tight = await report('?kind=near&max_distance=0.000001');
  expect(tight.groups.map(ids)).toEqual([['x1', 'x2', 'x3']]);
});

test('pages by cursor; bad parameters are named 400s; organisation token only', async () => {
  const first = await report('?limit=1');
  expect(first.groups.map(ids)).toEqual([['p', 'p-crop', 'p-half', 'p-q40']]);
  expect(first.next_cursor).toEqual(expect.any(String));
  const second = await report(`?limit=1&cursor=${first.next_cursor}`);
  expect(second.groups.map(ids)).toEqual([['x1', 'x2', 'x3']]);
  expect(second.next_cursor).toBeNull();

  for (const [query, param] of [
    ['?cursor=not-a-cursor!', 'cursor'],
    ['?cursor=eyJ4IjoxfQ', 'cursor'],
    ['?limit=0', 'limit'],
    ['?limit=101', 'limit'],
    ['?max_distance=0', 'max_distance'],
    ['?max_distance=0.3', 'max_distance'],
    ['?kind=similar', 'kind'],
  ]) {
    const r = await t.call('GET', `${ds.base}/duplicates${query}`, { token: ds.orgToken });
    expect([query, r.status, r.body.error.code]).toEqual([query, 400, 'invalid_request']);
    expect(JSON.stringify(r.body.error)).toContain(param);
  }
  const browse = await t.call('GET', `${ds.base}/duplicates`, { token: ds.dsToken });
  expect(browse.status).toBe(403);
  const none = await t.call('GET', '/orgs/dups/datasets/nope/duplicates', { token: ds.orgToken });
  expect(none.status).toBe(404);
});

test('GraphQL answers the same groups', async () => {
  const rest = await report();
  const r = await gql(
    t.url,
    DatasetDuplicatesDocument,
    { organisation: 'dups', dataset: 'catalogue', limit: 20 },
    ds.orgToken,
  );
  expect(r.errors).toBeUndefined();
  const d = r.data!.organisation!.dataset!.duplicates;
  // GraphQL names enum values in capitals
  expect(d.groups.map((g) => ({ ...g, kind: g.kind.toLowerCase() }))).toEqual(rest.groups);
  expect(d.computedAt).toBe(rest.computed_at);
});

test('exclude_same_parent keeps a same-parent pair apart, even through a third item', async () => {
  const r = await report('?exclude_same_parent=true');
  const groups = r.groups.map(ids);
  expect(groups.some((g) => g.includes('p-q40') && g.includes('p-half'))).toBe(false);
  // the closer one joins the photo; the other, close only to members, stays out
  const withPhoto = groups.find((g) => g.includes('p'))!;
  expect(withPhoto).toEqual(expect.arrayContaining(['p', 'p-crop']));
  expect(withPhoto.filter((id) => id === 'p-q40' || id === 'p-half')).toHaveLength(1);
  expect(groups).toContainEqual(['x1', 'x2', 'x3']);
});

test('dismissed pairs stay apart after a full recomputation; deleted items leave', async () => {
  const bad = await t.call('POST', `${ds.base}/duplicates/dismiss`, {
    token: ds.orgToken,
    body: { ids: ['p', 'nope'] },
  });
  expect(bad.status).toBe(400);
  expect(JSON.stringify(bad.body.error)).toContain('nope');
  const ok = await t.call('POST', `${ds.base}/duplicates/dismiss`, {
    token: ds.orgToken,
    body: { ids: ['p', 'p-crop'] },
  });
  expect(ok.status).toBe(200);
  const after = (await report()).groups.map(ids);
  expect(after.some((g) => g.includes('p') && g.includes('p-crop'))).toBe(false);
  expect(after).toContainEqual(['p', 'p-half', 'p-q40']);

  // a full recomputation: the stored neighbours forgotten, every item searched again
  const host = t.hosts.find((h) => h.container.config.APP_ROLES.has('worker'))!;
  const dataset = await host.container.ports.accounts.getDataset('dups', 'catalogue');
  const before = (await report()).computed_at;
  await host.container.ports.duplicates.clear(dataset!.id);
  const again = await waitFor('a new full pass', async () => {
    const r = await settled();
    return r.computed_at !== before && r;
  });
  const regrouped = again.groups.map(ids);
  expect(regrouped.some((g) => g.includes('p') && g.includes('p-crop'))).toBe(false);
  expect(regrouped).toContainEqual(['p', 'p-half', 'p-q40']);

  const del = await t.call('DELETE', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { ids: ['p-half', 'x3'] },
  });
  expect(del.status).toBe(202);
  const left = (await report()).groups.map(ids);
  expect(left).toContainEqual(['p', 'p-q40']);
  expect(left).toContainEqual(['x1', 'x2']);
  expect(left.flat()).not.toContain('p-half');
  expect(left.flat()).not.toContain('x3');
});
