/**
 * Tuned similarity (contract §20) through the whole service, on whichever engine the project
 * runs: product photos whose colour follows the seed and whose shape follows the category, so
 * plain similarity groups by colour and a projection learned from the category by shape. The
 * blended order must equal a brute-force ranking by the §20 formula over the stored vectors and
 * the stored projection, on every API host; random labels stay inactive; a relabelling refits;
 * switching off restores the plain order at once.
 */
import { project, deserialise, type Projection } from '../../src/domain/tuning/lda';
import { seededRandom } from '../../src/lib/seeded-random';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { productPhoto } from '../helpers/product-photos';

let img: ImageServer;
let t: TestApp;
let ds: Awaited<ReturnType<typeof setupDataset>>;
const CATEGORIES = ['bottle', 'bowl', 'bag'] as const;
const PER = 70;

interface Setting {
  learn_from: string | null;
  weight: number;
  state: string;
  reason: string | null;
  fitted_at: string | null;
  labelled_items: number;
  classes: number;
  cv_precision_at_10: { plain: number; tuned: number } | null;
}
type Hit = { id: string; score: number };

const setting = async (base = ds.base, token = ds.orgToken): Promise<Setting> =>
  (await t.call('GET', base, { token })).body.dataset.settings.similarity;
const put = (body: unknown, base = ds.base, token = ds.orgToken) =>
  t.call('PUT', `${base}/settings/similarity`, { token, body });
const similar = async (id: string, host = 0): Promise<Hit[]> => {
  const r = await t.callOn(host, 'GET', `${ds.base}/similar?id=${id}&limit=20`, {
    token: ds.dsToken,
  });
  expect(r.status).toBe(200);
  return r.body.results.slice(1).map((h: Hit) => ({ id: h.id, score: h.score }));
};
const whenState = (state: string, since?: string | null, base = ds.base, token = ds.orgToken) =>
  waitFor(
    `similarity ${state}`,
    async () => {
      const s = await setting(base, token);
      return s.state === state && s.fitted_at !== since && s;
    },
    90_000,
  );

/** Every processed item's stored vector, by id, as the engine keeps them. */
async function vectors(): Promise<Map<string, Float32Array>> {
  const ports = t.hosts[0]!.container.ports;
  const d = (await ports.accounts.getDataset('tuned', 'photos'))!;
  const out = new Map<string, Float32Array>();
  for (const c of CATEGORIES)
    for (let s = 1; s <= PER; s++) {
      const id = `${c}-${s}`;
      const e = await ports.content.getEmbedding(d.id, id);
      out.set(id, Float32Array.from(e!.vector!));
    }
  return out;
}

async function storedProjection(): Promise<{ model: string; p: Projection; weight: number }> {
  const ports = t.hosts[0]!.container.ports;
  const d = (await ports.accounts.getDataset('tuned', 'photos'))!;
  const model = d.similarity!.model!;
  const bytes = await ports.tuning.getModel(d.id, model);
  return { model, p: deserialise(bytes!), weight: d.similarity!.weight };
}

const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i]!, 0);

/** The §20 ranking by brute force: every other item by (1 − w)·cos + w·cos(projected). */
function bruteForce(
  target: string,
  all: Map<string, Float32Array>,
  tuned?: { p: Projection; weight: number },
): Hit[] {
  const q = all.get(target)!;
  const zq = tuned && project(tuned.p, q);
  return [...all]
    .filter(([id]) => id !== target)
    .map(([id, v]) => {
      const c = tuned
        ? (1 - tuned.weight) * dot(q, v) + tuned.weight * dot(zq!, project(tuned.p, v))
        : dot(q, v);
      return { id, score: (1 + c) / 2 };
    })
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
    .slice(0, 19);
}

function expectRanking(got: Hit[], want: Hit[]) {
  expect(got.map((h) => h.id)).toEqual(want.map((h) => h.id));
  got.forEach((h, i) => expect(h.score).toBeCloseTo(want[i]!.score, 4));
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ TUNING_PASS_MS: '200', WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'tuned', 'photos');
  const content = [];
  for (const c of CATEGORIES)
    for (let s = 1; s <= PER; s++) {
      img.files.set(`${c}-${s}.jpg`, await productPhoto(c, s));
      content.push({
        id: `${c}-${s}`,
        url: `${img.url}/file/${c}-${s}.jpg`,
        metadata: { kind: c },
      });
    }
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, content.length, 120_000);
}, 180_000);

afterAll(async () => {
  await t?.stop();
  await img?.close();
});

test('off by default; a bad setting is a 400 naming its field', async () => {
  // the dataset object keeps contract §3's shape until the setting is first made
  const before = await t.call('GET', ds.base, { token: ds.orgToken });
  expect(Object.keys(before.body.dataset.settings).sort()).toEqual(['fields', 'version']);
  const bad = await put({ learn_from: 'kind', weight: 1.5 });
  expect(bad.status).toBe(400);
  expect(bad.body.error.details).toEqual([expect.objectContaining({ field: 'weight' })]);
  const unknown = await put({ learn_from: 'kind', wieght: 0.5 });
  expect(unknown.status).toBe(400);
  expect((await put({ weight: 0.5 })).status).toBe(400);
  const dsToken = await put({ learn_from: 'kind' }, ds.base, ds.dsToken);
  expect(dsToken.status).toBe(403);
});

test('a fit turns tuning on, and similar ranks by the §20 blend on every host', async () => {
  const all = await vectors();
  const plain = await similar('bottle-1');
  expectRanking(plain, bruteForce('bottle-1', all));
  const r = await put({ learn_from: 'kind', weight: 0.75 });
  expect(r.status).toBe(200);
  expect(r.body.dataset.settings.similarity).toMatchObject({
    learn_from: 'kind',
    state: 'fitting',
  });
  const s = await whenState('active');
  expect(s).toMatchObject({ labelled_items: 3 * PER, classes: 3, reason: null });
  expect(s.cv_precision_at_10!.tuned).toBeGreaterThanOrEqual(s.cv_precision_at_10!.plain + 0.02);
  const tuned = await storedProjection();
  for (const id of ['bottle-1', 'bowl-7', 'bag-30']) {
    const want = bruteForce(id, all, tuned);
    for (let host = 0; host < t.hosts.filter((h) => h.url).length; host++)
      expectRanking(await similar(id, host), want);
  }
  // the projection learned the category: more of bottle-1's neighbours are bottles than before
  const bottles = (hits: Hit[]) => hits.filter((h) => h.id.startsWith('bottle-')).length;
  expect(bottles(await similar('bottle-1'))).toBeGreaterThan(bottles(plain));
}, 120_000);

test('GraphQL shows the setting and sets it', async () => {
  const q = `query($o: String!, $d: String!) { organisation(name: $o) { dataset(name: $d) {
    settings { similarity { learnFrom weight state labelledItems classes cvPrecisionAt10 { plain tuned } } } } } }`;
  const r = await t.call('POST', '/graphql', {
    token: ds.orgToken,
    body: { query: q, variables: { o: 'tuned', d: 'photos' } },
  });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.organisation.dataset.settings.similarity).toMatchObject({
    learnFrom: 'kind',
    state: 'active',
    classes: 3,
  });
  const m = await t.call('POST', '/graphql', {
    token: ds.orgToken,
    body: {
      query: `mutation { setSimilarity(organisation: "tuned", dataset: "photos", learnFrom: "kind", weight: 2) { name } }`,
    },
  });
  expect(m.body.errors[0].extensions.code).toBe('invalid_request');
  // learnFrom left out keeps the field: the same setting changes nothing
  const same = await t.call('POST', '/graphql', {
    token: ds.orgToken,
    body: {
      query: `mutation { setSimilarity(organisation: "tuned", dataset: "photos", weight: 0.75) {
        settings { similarity { learnFrom state } } } }`,
    },
  });
  expect(same.body.data.setSimilarity.settings.similarity).toEqual({
    learnFrom: 'kind',
    state: 'active',
  });
});

test('relabelling a quarter of one label refits, and the ranking follows', async () => {
  const before = await setting();
  const { model } = await storedProjection();
  const ranked = await similar('bowl-3');
  // a quarter of the bowls filed as bags
  const content = Array.from({ length: 18 }, (_, i) => ({
    id: `bowl-${i + 1}`,
    metadata: { kind: 'bag' },
  }));
  const w = await t.call('PUT', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  const after = await whenState('active', before.fitted_at);
  const refit = await storedProjection();
  expect(refit.model).not.toBe(model);
  expect(after.labelled_items).toBe(3 * PER);
  expectRanking(await similar('bowl-3'), bruteForce('bowl-3', await vectors(), refit));
  expect((await similar('bowl-3')).map((h) => h.id)).not.toEqual(ranked.map((h) => h.id));
}, 120_000);

test('an item processed after the fit ranks by the blend as soon as it is processed', async () => {
  const tuned = await storedProjection();
  img.files.set('late.jpg', await productPhoto('bottle', 1));
  const w = await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: {
      content: [{ id: 'late', url: `${img.url}/file/late.jpg`, metadata: { kind: 'bottle' } }],
    },
  });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, 3 * PER + 1);
  const all = await vectors();
  const ports = t.hosts[0]!.container.ports;
  const d = (await ports.accounts.getDataset('tuned', 'photos'))!;
  all.set('late', Float32Array.from((await ports.content.getEmbedding(d.id, 'late'))!.vector!));
  const got = await similar('bottle-1');
  // the same picture as bottle-1: first, at the blend's score
  expect(got[0]!.id).toBe('late');
  expectRanking(got, bruteForce('bottle-1', all, tuned));
}, 120_000);

test('switching off restores the plain ranking at once', async () => {
  const r = await put({ learn_from: null });
  expect(r.status).toBe(200);
  expect(r.body.dataset.settings.similarity).toMatchObject({ learn_from: null, state: 'off' });
  const all = await vectors();
  const ports = t.hosts[0]!.container.ports;
  const d = (await ports.accounts.getDataset('tuned', 'photos'))!;
  all.set('late', Float32Array.from((await ports.content.getEmbedding(d.id, 'late'))!.vector!));
  for (let host = 0; host < t.hosts.filter((h) => h.url).length; host++)
    expectRanking(await similar('bottle-1', host), bruteForce('bottle-1', all));
});

test('labels that carry no signal leave tuning inactive, with the reason', async () => {
  const other = await setupDataset(t, 'noise', 'photos');
  const content = [];
  const r = seededRandom(42);
  for (const c of CATEGORIES)
    for (let s = 1; s <= 20; s++)
      content.push({
        id: `${c}-${s}`,
        url: `${img.url}/file/${c}-${s}.jpg`,
        // a label that follows neither shape nor colour
        metadata: { kind: ['x', 'y', 'z'][Math.floor(r() * 3)] },
      });
  await t.call('POST', `${other.base}/content`, { token: other.orgToken, body: { content } });
  await waitProcessed(t, other.base, other.orgToken, content.length, 120_000);
  expect((await put({ learn_from: 'kind' }, other.base, other.orgToken)).status).toBe(200);
  const s = await whenState('inactive', undefined, other.base, other.orgToken);
  expect(s.reason).toMatch(/does not beat plain/);
  expect(s.cv_precision_at_10).not.toBeNull();
  const none = await put({ learn_from: 'missing_field' }, other.base, other.orgToken);
  expect(none.status).toBe(200);
  const n = await whenState('inactive', s.fitted_at, other.base, other.orgToken);
  expect(n).toMatchObject({ labelled_items: 0, classes: 0 });
  expect(n.reason).toMatch(/needs at least 2 labels/);
}, 180_000);
