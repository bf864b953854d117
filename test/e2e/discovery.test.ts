/**
 * Contract §15 (discovery controls, issue 37) end to end on whichever engine the project runs.
 * The catalogue (420 items) mixes distinct pictures, clusters of near-duplicates (six copies of
 * one picture under different URLs) and six labelled classes of related pictures; a numeric
 * field `n` (0…419, shuffled over the kinds) makes filters as narrow as wanted. Every answer is
 * judged against a brute-force model over the vectors the service's own analyzer computes from
 * the same bytes (test/helpers/discovery-model.ts): rankings, totals, centroids, best-score
 * tiers and each step of maximal marginal relevance.
 */
import fc from 'fast-check';
import { setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import {
  bySimilarity,
  byBestScore,
  centroid,
  CLASS_COUNT,
  classImage,
  closestPair,
  mmrProblems,
  rankingProblems,
  serveBytes,
  sim,
  TOL,
  vectorOf,
  type Entry,
  type PoolItem,
} from '../helpers/discovery-model';
import { gql, onlyError } from '../helpers/graphql';
import { makeImage } from '../helpers/image-server';
import { holds, qOf, type Cond, type Md } from '../helpers/q-model';

interface Item {
  id: string;
  path: string;
  url: string;
  md: Md & { n: number; kind: string; pic: string };
  vec: Float32Array;
}

const DISTINCT = 240;
const CLUSTERS = 16;
const COPIES = 6;
const PER_CLASS = 14;
const N = DISTINCT + CLUSTERS * COPIES + CLASS_COUNT * PER_CLASS;
/**
 * The property tests run fixed cases by default; DISCOVERY_SEED=<n> (and DISCOVERY_RUNS=<n>)
 * try others.
 */
const SEED = Number(process.env.DISCOVERY_SEED) || 37;
const RUNS = Number(process.env.DISCOVERY_RUNS) || 40;

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

let t: TestApp;
let server: Awaited<ReturnType<typeof serveBytes>>;
let ds: Awaited<ReturnType<typeof setupDataset>>;
let items: Item[] = [];
/** What the image server serves, by path. */
const files = new Map<string, Buffer>();
const byId = new Map<string, Item>();
const item = (id: string): Item => {
  const x = byId.get(id);
  if (!x) throw new Error(`the service returned an unknown id ${id}`);
  return x;
};

const get = (path: string, qs: string) =>
  t.call('GET', `${ds.base}/${path}?${qs}`, { token: ds.dsToken });
const lens = (png: Buffer, qs: string) =>
  t.call('POST', `${ds.base}/search?${qs}`, {
    token: ds.dsToken,
    body: { image: `data:image/png;base64,${png.toString('base64')}` },
  });
const entries = (r: { body: { results: Entry[] } }): Entry[] =>
  r.body.results.map((x) => ({ id: x.id, score: x.score }));
async function ok(label: string, p: Promise<{ status: number; body: any }>) {
  const r = await p;
  if (r.status !== 200) throw new Error(`${label}: ${r.status} ${JSON.stringify(r.body)}`);
  return r as { status: number; body: { results: Entry[]; total_results?: number } };
}
/** Pages 1…k of a request, concatenated. */
async function pages(path: string, qs: string, limit: number, k: number): Promise<Entry[]> {
  const out: Entry[] = [];
  for (let page = 1; page <= k; page++)
    out.push(...entries(await ok(`${path}?${qs}`, get(path, `${qs}&limit=${limit}&page=${page}`))));
  return out;
}
const vecs = (es: readonly Entry[]) => es.map((e) => item(e.id).vec);
const ids = (es: readonly Entry[]) => es.map((e) => e.id);
/**
 * The first `from` or more entries of a ranking, cut where the next score is clearly lower: a
 * candidate pool that no tie (copies of one picture) splits.
 */
function untiedPrefix(r: readonly Entry[], from: number): Entry[] {
  for (let c = from; c < r.length; c++)
    if (r[c - 1]!.score - r[c]!.score > TOL) return r.slice(0, c);
  throw new Error(`no cut without a tie from ${from} in ${r.length} entries`);
}
const others = (...excluded: string[]) => items.filter((x) => !excluded.includes(x.id));
const matching = (cs: Cond[]) => items.filter((x) => cs.every((c) => holds(x.md, c)));

beforeAll(async () => {
  // the catalogue, in a shuffled order that `n` numbers
  const rows: Array<
    Omit<Item, 'vec' | 'md' | 'url'> & {
      kind: string;
      pic: string;
      cls?: string;
      bytes: Promise<Buffer>;
    }
  > = [];
  for (let s = 0; s < DISTINCT; s++)
    rows.push({
      id: `d-${s}`,
      path: `/img/${s}.png`,
      kind: 'distinct',
      pic: `p${s}`,
      bytes: makeImage(s),
    });
  for (let j = 0; j < CLUSTERS; j++) {
    const bytes = makeImage(DISTINCT + j);
    for (let k = 0; k < COPIES; k++)
      rows.push({
        id: `c-${j}-${k}`,
        path: `/img/${DISTINCT + j}.png`,
        kind: 'cluster',
        pic: `p${DISTINCT + j}`,
        bytes,
      });
  }
  for (let c = 0; c < CLASS_COUNT; c++)
    for (let k = 0; k < PER_CLASS; k++)
      rows.push({
        id: `k-${c}-${k}`,
        path: `/cls/${c}/${k}.png`,
        kind: 'class',
        pic: `k${c}-${k}`,
        cls: `c${c}`,
        bytes: classImage(c, k),
      });
  const rnd = mulberry32(37);
  for (let i = rows.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [rows[i], rows[j]] = [rows[j]!, rows[i]!];
  }
  const vecOfPath = new Map<string, Float32Array>();
  for (const r of rows)
    if (!files.has(r.path)) {
      const b = await r.bytes;
      files.set(r.path, b);
      vecOfPath.set(r.path, await vectorOf(b));
    }
  server = await serveBytes(files);
  items = rows.map((r, n) => ({
    id: r.id,
    path: r.path,
    url: `${server.url}${r.path}?copy=${r.id}`,
    md: {
      n,
      half: n % 2 ? 'odd' : 'even',
      kind: r.kind,
      pic: r.pic,
      ...(r.cls ? { cls: r.cls } : {}),
    },
    vec: vecOfPath.get(r.path)!,
  }));
  for (const x of items) byId.set(x.id, x);
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'discorg', 'disc');
  const content = items.map((x) => ({ id: x.id, url: x.url, metadata: x.md }));
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
  const d = await t.call('GET', ds.base, { token: ds.orgToken });
  expect(d.body.dataset.counts).toMatchObject({ processed: N, errors: 0 });
}, 180_000);

afterAll(async () => {
  await t?.stop();
  await server?.close();
});

/** A cluster item's picture has five other copies in the catalogue. */
const CLUSTER_TARGETS = ['c-0-0', 'c-5-3', 'c-11-1'];

describe('diversity (maximal marginal relevance)', () => {
  test('diversity=1 spreads a page of near-copies apart; diversity=0 is the plain answer', async () => {
    for (const target of CLUSTER_TARGETS) {
      const tv = item(target).vec;
      const plain = entries(await ok('plain', get('similar', `id=${target}&limit=10`)));
      const zero = entries(await ok('d=0', get('similar', `id=${target}&limit=10&diversity=0`)));
      expect(zero).toEqual(plain);
      const one = entries(await ok('d=1', get('similar', `id=${target}&limit=10&diversity=1`)));
      expect([one[0], one.length]).toEqual([{ id: target, score: 1 }, 10]);
      // the target's five copies crowd the plain page: its closest pair are identical pictures
      const plainPair = closestPair(vecs(plain.slice(1)));
      const onePair = closestPair(vecs(one.slice(1)));
      expect(plainPair).toBeGreaterThan(1 - TOL);
      expect(onePair).toBeLessThan(plainPair - 0.01);
      // one copy at most: no picture twice
      const pics = one.slice(1).map((e) => item(e.id).md.pic);
      expect(new Set(pics).size).toBe(pics.length);
      // `score` stays the similarity to the target
      for (const e of one) expect(Math.abs(e.score - sim(tv, item(e.id).vec))).toBeLessThan(TOL);
    }
  });

  test('collection, explore and lens spread too; diversity=0 is their plain answer', async () => {
    const [target] = CLUSTER_TARGETS;
    const png = await makeImage(DISTINCT); // the picture of cluster 0
    const cases: Array<[string, (extra: string) => ReturnType<typeof get>]> = [
      ['collection', (x) => get('collection', `ids=${target}&limit=10${x}`)],
      ['explore', (x) => get('explore', `id=${target}&limit=10${x}`)],
      ['lens', (x) => lens(png, `limit=10${x}`)],
    ];
    for (const [label, call] of cases) {
      const zero = entries(await ok(label, call('&diversity=0')));
      const one = entries(await ok(label, call('&diversity=1')));
      expect([label, one.length]).toEqual([label, 10]);
      if (label !== 'explore') {
        // explore keeps its own diversification when diversity is absent
        expect([label, zero]).toEqual([label, entries(await ok(label, call('')))]);
      }
      const zeroPair = closestPair(vecs(zero));
      const onePair = closestPair(vecs(one));
      expect([label, zeroPair > 1 - TOL]).toEqual([label, true]);
      expect([label, onePair < zeroPair - 0.01]).toEqual([label, true]);
    }
  });

  test('every result is the §15 greedy choice over the candidate pool, page after page', async () => {
    const lensPng = await makeImage(DISTINCT + 5);
    const pool = (es: readonly Entry[]): PoolItem[] =>
      es.map((e) => ({ ...e, vec: item(e.id).vec }));
    for (const d of [0.3, 0.5, 0.8, 1]) {
      for (const target of CLUSTER_TARGETS) {
        // similar: the pool is the plain ranking's first `candidates` after the target
        const near = (await pages('similar', `id=${target}`, 50, 1)).slice(1);
        const sPool = untiedPrefix(near, 30);
        const c = sPool.length;
        const div = await pages(
          'similar',
          `id=${target}&diversity=${d}&candidates=${c}`,
          10,
          Math.ceil((c + 1) / 10) + 1,
        );
        // [target, the c candidates in the order chosen], then nothing: pages past the pool are short
        expect(div[0]).toEqual({ id: target, score: 1 });
        expect([d, target, div.length]).toEqual([d, target, c + 1]);
        const chosen = div.slice(1);
        expect([d, target, mmrProblems(ids(chosen), pool(sPool), d)]).toEqual([d, target, []]);
        // `score` stays the similarity to the target
        const plainScore = new Map(sPool.map((p) => [p.id, p.score]));
        for (const e of chosen) expect([e.id, e.score]).toEqual([e.id, plainScore.get(e.id)]);

        // collection: the pool is the plain collection ranking
        const cq = `ids=${target},${CLUSTER_TARGETS.find((x) => x !== target)}`;
        const cPool = untiedPrefix(
          entries(await ok('collection', get('collection', `${cq}&limit=50`))),
          30,
        );
        const cdiv = entries(
          await ok(
            'collection',
            get('collection', `${cq}&limit=10&diversity=${d}&candidates=${cPool.length}`),
          ),
        );
        expect(['collection', d, cdiv.length, mmrProblems(ids(cdiv), pool(cPool), d)]).toEqual([
          'collection',
          d,
          10,
          [],
        ]);
      }
      // explore with id: the pool is the nearest items after the selection
      const target = CLUSTER_TARGETS[1]!;
      const ePool = untiedPrefix((await pages('similar', `id=${target}`, 50, 1)).slice(1), 24);
      const ediv = entries(
        await ok(
          'explore',
          get('explore', `id=${target}&limit=8&diversity=${d}&candidates=${ePool.length}`),
        ),
      );
      expect(['explore', d, ediv.length, mmrProblems(ids(ediv), pool(ePool), d)]).toEqual([
        'explore',
        d,
        8,
        [],
      ]);
      // lens: the pool is the plain lens ranking (score: the similarity to the photo)
      const lPool = untiedPrefix(entries(await ok('lens', lens(lensPng, 'limit=50'))), 30);
      const ldiv = entries(
        await ok('lens', lens(lensPng, `limit=10&diversity=${d}&candidates=${lPool.length}`)),
      );
      expect(['lens', d, ldiv.length, mmrProblems(ids(ldiv), pool(lPool), d)]).toEqual([
        'lens',
        d,
        10,
        [],
      ]);
    }
  });
  test("the pool: 4 × limit by default, filtered by q, without explore's path, after the negatives", async () => {
    const pool = (es: readonly Entry[]): PoolItem[] =>
      es.map((e) => ({ ...e, vec: item(e.id).vec }));
    // default candidates = 4 × limit, on targets whose 40th and 41st neighbours do not tie
    const target = 'c-7-0';
    let checked = 0;
    for (const t0 of ['c-7-0', 'c-9-2', 'd-17', 'k-4-4', 'd-88']) {
      const near = (await pages('similar', `id=${t0}`, 50, 1)).slice(1);
      if (untiedPrefix(near, 40).length !== 40) continue;
      const div = entries(await ok('similar', get('similar', `id=${t0}&limit=10&diversity=0.6`)));
      expect([t0, mmrProblems(ids(div.slice(1)), pool(near.slice(0, 40)), 0.6)]).toEqual([t0, []]);
      checked++;
    }
    expect(checked).toBeGreaterThan(1);
    // q narrows the pool
    const q = 'q=kind:!distinct';
    const qNear = untiedPrefix((await pages('similar', `id=${target}&${q}`, 50, 1)).slice(1), 30);
    const qDiv = await pages(
      'similar',
      `id=${target}&${q}&diversity=0.5&candidates=${qNear.length}`,
      10,
      Math.ceil((qNear.length + 1) / 10),
    );
    expect(mmrProblems(ids(qDiv.slice(1)), pool(qNear), 0.5)).toEqual([]);
    for (const e of qDiv) if (e.id !== target) expect(item(e.id).md.kind).not.toBe('distinct');
    // explore: the selection and its path stay out of the pool
    const path = 'c-7-1';
    const eNear = untiedPrefix(
      (await pages('similar', `id=${target}`, 50, 1)).slice(1).filter((e) => e.id !== path),
      24,
    );
    const eDiv = entries(
      await ok(
        'explore',
        get(
          'explore',
          `id=${target}&path=${path}&limit=8&diversity=0.7&candidates=${eNear.length}`,
        ),
      ),
    );
    expect(mmrProblems(ids(eDiv), pool(eNear), 0.7)).toEqual([]);
    // collection with negatives: the pool and relevance are those of the steered centroid
    const cq = 'ids=k-0-0,k-1-0&negative_ids=k-1-1,k-1-2';
    const cNear = untiedPrefix(
      entries(await ok('collection', get('collection', `${cq}&limit=50`))),
      30,
    );
    const cDiv = entries(
      await ok(
        'collection',
        get('collection', `${cq}&limit=10&diversity=0.5&candidates=${cNear.length}`),
      ),
    );
    expect(mmrProblems(ids(cDiv), pool(cNear), 0.5)).toEqual([]);
    expect(cDiv).toHaveLength(10);
  });
});

describe('pages', () => {
  test('pages 1…5 of similar are one exact ranking: the model, and one request of 50', async () => {
    const rnd = mulberry32(5);
    const targets = [
      ...CLUSTER_TARGETS,
      ...Array.from({ length: 4 }, () => items[Math.floor(rnd() * N)]!.id),
    ];
    for (const target of targets) {
      const paged = await pages('similar', `id=${target}`, 10, 5);
      const whole = entries(await ok('similar', get('similar', `id=${target}&limit=50`)));
      expect([target, paged]).toEqual([target, whole]);
      expect(paged[0]).toEqual({ id: target, score: 1 });
      const model = bySimilarity(others(target), item(target).vec);
      expect([target, rankingProblems(paged.slice(1), model, 49)]).toEqual([target, []]);
    }
  });

  test('paging through the whole catalogue shows every item once, in order', async () => {
    const target = 'k-2-3';
    const all = await pages('similar', `id=${target}`, 50, 9);
    // the target, then the N − 1 other items: page 9 has the last 20
    expect(all).toHaveLength(N);
    expect(new Set(ids(all)).size).toBe(N);
    const model = bySimilarity(others(target), item(target).vec);
    expect(rankingProblems(all.slice(1), model, N - 1)).toEqual([]);
    // past the end: empty, not an error (page × limit = 1000)
    const past = await ok('past', get('similar', `id=${target}&limit=50&page=20`));
    expect(past.body.results).toEqual([]);
    // with q, the pages cover exactly the matching items
    const q = 'half:odd';
    const odd = await pages('similar', `id=${target}&q=${q}`, 40, 6);
    const want = others(target).filter((x) => x.md.half === 'odd');
    expect(odd).toHaveLength(want.length + 1);
    expect(
      rankingProblems(odd.slice(1), bySimilarity(want, item(target).vec), want.length),
    ).toEqual([]);
  });

  test('pages cut through a tie (copies of one picture) without repeat or gap', async () => {
    // each request's first 12 hold two sets of six copies: pages of 4 cut through both
    const cases: Array<[string, (page: string) => ReturnType<typeof get>]> = [
      ['similar', (p) => get('similar', `id=c-3-0&${p}`)],
      ['collection', (p) => get('collection', `ids=c-3-0&${p}`)],
      ['best_score', (p) => get('collection', `ids=c-3-0,c-9-0&strategy=best_score&${p}`)],
      ['lens', (p) => lens(lensCopy, p)],
      ['lens 9', (p) => lens(lensCopy9, p)],
    ];
    const lensCopy = await makeImage(DISTINCT + 3);
    const lensCopy9 = await makeImage(DISTINCT + 9);
    const got: Array<[string, string[]]> = [];
    const want: Array<[string, string[]]> = [];
    for (const [label, call] of cases) {
      const paged: Entry[] = [];
      for (let page = 1; page <= 3; page++)
        paged.push(...entries(await ok(label, call(`limit=4&page=${page}`))));
      got.push([label, ids(paged)]);
      want.push([label, ids(entries(await ok(label, call('limit=12'))))]);
    }
    expect(got).toEqual(want);
  });

  test('collection and lens pages continue each other with no repeat or gap', async () => {
    const cq = 'ids=k-1-0,k-4-2';
    const paged = await pages('collection', cq, 10, 5);
    const whole = entries(await ok('collection', get('collection', `${cq}&limit=50`)));
    expect(paged).toEqual(whole);
    const pos = [item('k-1-0').vec, item('k-4-2').vec];
    expect(
      rankingProblems(paged, bySimilarity(others('k-1-0', 'k-4-2'), centroid(pos, [])), 50),
    ).toEqual([]);
    const png = await makeImage(17);
    const lpaged: Entry[] = [];
    for (let page = 1; page <= 5; page++)
      lpaged.push(...entries(await ok('lens', lens(png, `limit=10&page=${page}`))));
    const lwhole = entries(await ok('lens', lens(png, 'limit=50')));
    expect(lpaged).toEqual(lwhole);
    expect(new Set(ids(lpaged)).size).toBe(50);
  });
});

// ---- exhaustive: a property over random filters ---------------------------------------------

const condArb: fc.Arbitrary<Cond[]> = fc.oneof(
  // under 1 %: one to four consecutive n out of 420
  fc
    .tuple(fc.nat(N - 1), fc.nat(3))
    .map(([a, w]) => [{ kind: 'range', field: 'n', gte: a, lte: a + w } as Cond]),
  fc
    .tuple(fc.nat(N - 1), fc.nat(N))
    .map(([a, w]) => [{ kind: 'range', field: 'n', gte: a, lte: a + w } as Cond]),
  fc
    .tuple(fc.nat(N - 1), fc.nat(60), fc.constantFrom('odd', 'even'))
    .map(([a, w, h]) => [
      { kind: 'range', field: 'n', gte: a, lte: a + w } as Cond,
      { kind: 'eq', field: 'half', values: [h] } as Cond,
    ]),
  fc
    .subarray(
      Array.from({ length: CLASS_COUNT }, (_, c) => `c${c}`),
      { minLength: 1, maxLength: 2 },
    )
    .map((cls) => [{ kind: 'eq', field: 'cls', values: cls } as Cond]),
  fc.constantFrom<Cond[]>(
    [{ kind: 'not', field: 'kind', values: ['distinct'] }],
    [{ kind: 'eq', field: 'kind', values: ['cluster'] }],
    [],
  ),
);

describe(`exhaustive=true (seed ${SEED})`, () => {
  test('similar: exactly the brute-force ranking of every matching item, and their count', async () => {
    await fc.assert(
      fc.asyncProperty(
        condArb,
        fc.nat(N - 1),
        fc.integer({ min: 2, max: 50 }),
        fc.integer({ min: 1, max: 3 }),
        async (cs, ti, limit, k) => {
          const target = items[ti]!;
          const q = cs.length ? `&q=${qOf(cs)}` : '';
          const qs = `id=${target.id}&exhaustive=true${q}`;
          const eligible = matching(cs).filter((x) => x.id !== target.id);
          const got: Entry[] = [];
          for (let page = 1; page <= k; page++) {
            const r = await ok(qs, get('similar', `${qs}&limit=${limit}&page=${page}`));
            expect([qs, page, r.body.total_results]).toEqual([qs, page, eligible.length]);
            got.push(...entries(r));
          }
          expect(got[0]).toEqual({ id: target.id, score: 1 });
          const model = bySimilarity(eligible, target.vec);
          expect([qs, limit, k, rankingProblems(got.slice(1), model, k * limit - 1)]).toEqual([
            qs,
            limit,
            k,
            [],
          ]);
        },
      ),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 60_000);

  test('collection (centroid and best_score, with negatives): the brute-force ranking and count', async () => {
    await fc.assert(
      fc.asyncProperty(
        condArb,
        fc.uniqueArray(fc.nat(N - 1), { minLength: 1, maxLength: 5 }),
        fc.nat(3),
        fc.constantFrom('centroid', 'best_score', undefined),
        fc.integer({ min: 2, max: 50 }),
        fc.integer({ min: 1, max: 2 }),
        async (cs, picks, negCount, strategy, limit, k) => {
          const nNeg = Math.min(negCount, picks.length - 1);
          const pos = picks.slice(0, picks.length - nNeg).map((i) => items[i]!);
          const neg = picks.slice(picks.length - nNeg).map((i) => items[i]!);
          const inputs = [...pos, ...neg].map((x) => x.id);
          const q = cs.length ? `&q=${qOf(cs)}` : '';
          const qs =
            `ids=${pos.map((x) => x.id).join(',')}` +
            (neg.length ? `&negative_ids=${neg.map((x) => x.id).join(',')}` : '') +
            (strategy ? `&strategy=${strategy}` : '') +
            `&exhaustive=true${q}`;
          const eligible = matching(cs).filter((x) => !inputs.includes(x.id));
          const model =
            strategy === 'best_score'
              ? byBestScore(
                  eligible,
                  pos.map((x) => x.vec),
                  neg.map((x) => x.vec),
                )
              : bySimilarity(
                  eligible,
                  centroid(
                    pos.map((x) => x.vec),
                    neg.map((x) => x.vec),
                  ),
                );
          const got: Entry[] = [];
          for (let page = 1; page <= k; page++) {
            const r = await ok(qs, get('collection', `${qs}&limit=${limit}&page=${page}`));
            expect([qs, page, r.body.total_results]).toEqual([qs, page, eligible.length]);
            got.push(...entries(r));
          }
          expect([qs, limit, k, rankingProblems(got, model, k * limit)]).toEqual([
            qs,
            limit,
            k,
            [],
          ]);
        },
      ),
      { numRuns: RUNS, seed: SEED + 1500, endOnFailure: true },
    );
  }, 60_000);

  test('with diversity: the §15 greedy order over the exact pool of matching items', async () => {
    await fc.assert(
      fc.asyncProperty(
        condArb,
        fc.nat(N - 1),
        fc.constantFrom(0.2, 0.5, 0.75, 1),
        fc.integer({ min: 2, max: 20 }),
        fc.integer({ min: 0, max: 30 }),
        fc.boolean(),
        async (cs, ti, d, limit, extra, collection) => {
          const target = items[ti]!;
          const q = cs.length ? `&q=${qOf(cs)}` : '';
          const eligible = matching(cs).filter((x) => x.id !== target.id);
          const model = bySimilarity(eligible, target.vec);
          // a pool size from the limit up that no tie splits (or every matching item)
          let c = Math.min(limit + extra, model.length);
          while (c < model.length && model[c - 1]!.score - model[c]!.score <= TOL) c++;
          const candidates = Math.max(c, limit);
          if (candidates > 500) return;
          const pool = model.slice(0, candidates).map((m) => ({ ...m, vec: item(m.id).vec }));
          const skip = collection ? 0 : 1;
          const qs =
            (collection ? `ids=${target.id}` : `id=${target.id}`) +
            `&exhaustive=true&diversity=${d}&candidates=${candidates}${q}`;
          const k = Math.ceil((pool.length + skip) / limit);
          const got = await pages(collection ? 'collection' : 'similar', qs, limit, k);
          if (!collection) expect(got[0]).toEqual({ id: target.id, score: 1 });
          const chosen = got.slice(skip);
          expect([qs, limit, chosen.length]).toEqual([qs, limit, pool.length]);
          expect([qs, limit, mmrProblems(ids(chosen), pool, d)]).toEqual([qs, limit, []]);
          const score = new Map(pool.map((p) => [p.id, p.score]));
          for (const e of chosen)
            expect(Math.abs(e.score - (score.get(e.id) ?? -1))).toBeLessThan(TOL);
        },
      ),
      { numRuns: RUNS, seed: SEED + 3000, endOnFailure: true },
    );
  }, 60_000);

  test('without exhaustive there is no total_results; lens counts every matching item', async () => {
    const r = await ok('similar', get('similar', 'id=d-3&limit=5'));
    expect(r.body).not.toHaveProperty('total_results');
    const png = await makeImage(3);
    const cs: Cond[] = [{ kind: 'range', field: 'n', gte: 100, lte: 102 }];
    const l = await ok('lens', lens(png, `limit=10&exhaustive=true&q=${qOf(cs)}`));
    expect(l.body.total_results).toBe(3);
    expect(new Set(ids(entries(l)))).toEqual(new Set(matching(cs).map((x) => x.id)));
  });
});

// ---- steering: negative_ids and best_score --------------------------------------------------

describe('collection: negative_ids and strategy', () => {
  const share = (es: readonly Entry[], cls: string) =>
    es.filter((e) => item(e.id).md.cls === cls).length / es.length;

  test('steering away from a class lowers its share of the results', async () => {
    const figures: string[] = [];
    for (const [a, b] of [
      [0, 1],
      [2, 3],
      [4, 5],
    ] as const) {
      const pos = `ids=k-${a}-0,k-${b}-0&limit=20`;
      const neg = `&negative_ids=k-${b}-1,k-${b}-2`;
      for (const strategy of ['centroid', 'best_score']) {
        const without = entries(
          await ok('without', get('collection', `${pos}&strategy=${strategy}`)),
        );
        const withNeg = entries(
          await ok('with', get('collection', `${pos}${neg}&strategy=${strategy}`)),
        );
        const before = share(without, `c${b}`);
        const after = share(withNeg, `c${b}`);
        figures.push(`c${b} ${strategy}: ${before.toFixed(2)} → ${after.toFixed(2)}`);
        // both classes fill the plain answer; with the negatives, b gives way to a
        expect([strategy, before >= 0.3]).toEqual([strategy, true]);
        expect([strategy, after <= before / 2]).toEqual([strategy, true]);
        expect([strategy, share(withNeg, `c${a}`) > share(without, `c${a}`)]).toEqual([
          strategy,
          true,
        ]);
        for (const id of [`k-${a}-0`, `k-${b}-0`, `k-${b}-1`, `k-${b}-2`])
          expect(ids(withNeg)).not.toContain(id);
      }
    }
    if (process.env.DISCOVERY_FIGURES) console.log(figures.join('\n'));
  });

  test('best_score: candidates nearer a negative than every positive rank below all others', async () => {
    // positives and negatives of one class: about half its items are nearer a negative
    const posIds = ['k-3-0', 'k-3-5'];
    const negIds = ['k-3-1', 'k-3-8'];
    const q = 'q=kind:class';
    const qs = `ids=${posIds.join(',')}&negative_ids=${negIds.join(',')}&strategy=best_score&limit=50&${q}`;
    const got = entries(await ok('best_score', get('collection', qs)));
    const eligible = items.filter(
      (x) => x.md.kind === 'class' && ![...posIds, ...negIds].includes(x.id),
    );
    const model = byBestScore(
      eligible,
      posIds.map((i) => item(i).vec),
      negIds.map((i) => item(i).vec),
    );
    expect(rankingProblems(got, model, 50)).toEqual([]);
    const tier = new Map(model.map((m) => [m.id, m.demoted]));
    const tiers = got.map((e) => tier.get(e.id));
    // the page reaches the demoted: some are shown, every one after every promoted item
    expect(tiers.filter((x) => x === true).length).toBeGreaterThan(0);
    const firstDemoted = tiers.indexOf(true);
    expect(tiers.slice(firstDemoted).filter((x) => x === false)).toEqual([]);
    // demoted class-3 items would have led without the negatives
    const demoted3 = got.filter((e) => tier.get(e.id) === true && item(e.id).md.cls === 'c3');
    expect(demoted3.length).toBeGreaterThan(0);
    const plain = entries(
      await ok(
        'plain',
        get('collection', `ids=${posIds.join(',')}&strategy=best_score&limit=10&${q}`),
      ),
    );
    expect(plain.filter((e) => tier.get(e.id) === true).length).toBeGreaterThan(0);
    // scores are the best similarity to a positive
    for (const e of got)
      expect(
        Math.abs(e.score - Math.max(...posIds.map((p) => sim(item(p).vec, item(e.id).vec)))),
      ).toBeLessThan(TOL);
  });
});

describe('best_score past the first 2,000 candidates', () => {
  /**
   * 2,100 copies of the negative's picture are nearer the positive than most kept items: an
   * exhaustive best_score ranking must still find every kept item before any of them.
   */
  const COPIES_OF_NEGATIVE = 2100;
  const rows: Array<{ id: string; path: string }> = [];
  let steer: Awaited<ReturnType<typeof setupDataset>>;
  beforeAll(async () => {
    files.set('/img/266.png', await makeImage(266)); // 10's colour, the bar elsewhere
    rows.push({ id: 'y', path: '/img/266.png' });
    for (let i = 0; i < COPIES_OF_NEGATIVE; i++) rows.push({ id: `x-${i}`, path: '/img/10.png' });
    for (let i = 0; i < 40; i++) rows.push({ id: `z-${i}`, path: `/img/${100 + i}.png` });
    steer = await setupDataset(t, 'steerorg', 'steer');
    for (let i = 0; i < rows.length; i += 1000) {
      const content = rows
        .slice(i, i + 1000)
        .map((r) => ({ id: r.id, url: `${server.url}${r.path}?copy=${r.id}` }));
      const w = await t.call('POST', `${steer.base}/content`, {
        token: steer.orgToken,
        body: { content },
      });
      expect(w.status).toBe(202);
    }
    await waitProcessed(t, steer.base, steer.orgToken, rows.length, 120_000);
  }, 150_000);

  test('exhaustive=true: every kept item before the demoted copies', async () => {
    const vec = new Map<string, Float32Array>();
    for (const r of rows) if (!vec.has(r.path)) vec.set(r.path, await vectorOf(files.get(r.path)!));
    const eligible = rows
      .filter((r) => r.id !== 'y' && r.id !== 'x-0')
      .map((r) => ({ id: r.id, vec: vec.get(r.path)! }));
    const model = byBestScore(eligible, [vec.get('/img/266.png')!], [vec.get('/img/10.png')!]);
    const kept = model.filter((m) => m.demoted === false).length;
    expect(kept).toBeGreaterThan(10);
    const r = await ok(
      'steer',
      t.call(
        'GET',
        `${steer.base}/collection?ids=y&negative_ids=x-0&strategy=best_score&limit=10&page=2&exhaustive=true`,
        { token: steer.dsToken },
      ),
    );
    expect(r.body.total_results).toBe(eligible.length);
    const firstPage = entries(
      await ok(
        'steer',
        t.call(
          'GET',
          `${steer.base}/collection?ids=y&negative_ids=x-0&strategy=best_score&limit=10&exhaustive=true`,
          { token: steer.dsToken },
        ),
      ),
    );
    expect(rankingProblems([...firstPage, ...entries(r)], model, 20)).toEqual([]);
  });
});

// ---- min_score and client mistakes ------------------------------------------------------------

describe('min_score', () => {
  test('drops results below it, shortening the page', async () => {
    for (const [path, qs] of [
      ['similar', 'id=d-40'],
      ['collection', 'ids=d-40,k-2-2'],
      ['similar', 'id=c-3-0&diversity=0.5'],
    ] as const) {
      const plain = entries(await ok(path, get(path, `${qs}&limit=20`)));
      // a threshold between the 8th and the next lower score
      const i = plain.findIndex((e, j) => j >= 7 && e.score < plain[7]!.score);
      const cut = ((plain[7]!.score + plain[i]!.score) / 2).toFixed(7);
      const r = entries(await ok(path, get(path, `${qs}&limit=20&min_score=${cut}`)));
      expect([path, qs, r]).toEqual([path, qs, plain.filter((e) => e.score >= Number(cut))]);
      expect(r.length).toBeLessThan(20);
    }
  });
});

describe('client mistakes are 400s naming the parameter', () => {
  test('bad values', async () => {
    const cases: Array<[string, string, string]> = [
      ['similar', 'id=d-1&limit=50&page=21', 'page'],
      ['similar', 'id=d-1&limit=10&page=101', 'page'],
      ['similar', 'id=d-1&page=0', 'page'],
      ['similar', 'id=d-1&page=x', 'page'],
      ['collection', 'ids=d-1&limit=40&page=26', 'page'],
      ['similar', 'id=d-1&diversity=1.5', 'diversity'],
      ['similar', 'id=d-1&diversity=-0.1', 'diversity'],
      ['explore', 'id=d-1&diversity=abc', 'diversity'],
      ['similar', 'id=d-1&limit=10&candidates=5', 'candidates'],
      ['similar', 'id=d-1&candidates=501', 'candidates'],
      ['collection', 'ids=d-1&candidates=20.5', 'candidates'],
      ['similar', 'id=d-1&min_score=1.2', 'min_score'],
      ['collection', 'ids=d-1&min_score=-1', 'min_score'],
      ['similar', 'id=d-1&exhaustive=maybe', 'exhaustive'],
      ['collection', 'ids=d-1&strategy=nearest', 'strategy'],
      [
        'collection',
        `ids=d-1&negative_ids=${Array.from({ length: 51 }, (_, i) => `d-${i + 2}`).join(',')}`,
        'negative_ids',
      ],
    ];
    const got = [];
    for (const [path, qs] of cases) {
      const r = await get(path, qs);
      got.push([path, qs, r.status, r.body?.error?.details?.[0]?.param]);
    }
    expect(got).toEqual(cases.map(([path, qs, param]) => [path, qs, 400, param]));
    const png = await makeImage(1);
    const l = await lens(png, 'limit=50&page=21');
    expect([l.status, l.body.error.details[0].param]).toEqual([400, 'page']);
    // the deepest allowed page is fine
    expect((await get('similar', 'id=d-1&limit=10&page=100')).status).toBe(200);
  });

  test('unknown negative_ids are a 404 naming them', async () => {
    const r = await get('collection', 'ids=d-1&negative_ids=d-2,nope-1,nope-2');
    expect(r.status).toBe(404);
    expect(r.body.error.message).toContain('nope-1');
    expect(r.body.error.details.map((d: { id: string }) => d.id)).toEqual(['nope-1', 'nope-2']);
  });
});

// ---- GraphQL ---------------------------------------------------------------------------------

describe('GraphQL', () => {
  const vision = (body: string) =>
    gql<{ vision: Record<string, any> }, object>(
      t.url,
      `query { vision(organisation: "discorg", dataset: "disc") { ${body} } }`,
      {},
      ds.dsToken,
    );

  test('similarPage: pages, totalResults and hasNextPage as REST and the model say', async () => {
    const cs: Cond[] = [{ kind: 'range', field: 'n', gte: 200, lte: 211 }];
    const target = 'c-2-2';
    const eligible = matching(cs).filter((x) => x.id !== target);
    const seen: Entry[] = [];
    for (let page = 1; page <= 3; page++) {
      const g = await vision(
        `similarPage(id: "${target}", limit: 5, page: ${page}, exhaustive: true, q: "${qOf(cs)}") {
           page limit totalResults hasNextPage results { id score } }`,
      );
      expect(g.errors).toBeUndefined();
      const p = g.data!.vision.similarPage;
      const rest = await ok(
        'rest',
        get('similar', `id=${target}&limit=5&page=${page}&exhaustive=true&q=${qOf(cs)}`),
      );
      expect(p.results).toEqual(entries(rest));
      // the ranking is [target, the 12 matching items]: 13 entries, pages of 5, 5, 3
      expect({
        page: p.page,
        limit: p.limit,
        totalResults: p.totalResults,
        hasNextPage: p.hasNextPage,
      }).toEqual({
        page,
        limit: 5,
        totalResults: eligible.length,
        hasNextPage: page * 5 < eligible.length + 1,
      });
      seen.push(...p.results);
    }
    expect(seen).toHaveLength(eligible.length + 1);
    expect(rankingProblems(seen.slice(1), bySimilarity(eligible, item(target).vec), 14)).toEqual(
      [],
    );
    const plain = await vision(
      `similarPage(id: "${target}", limit: 5) { totalResults hasNextPage }`,
    );
    expect(plain.data!.vision.similarPage.totalResults).toBeNull();
  });

  test('the new arguments answer what REST answers', async () => {
    const g = await vision(`
      a: similar(id: "c-1-0", limit: 10, diversity: 0.7, candidates: 30) { id score }
      b: collection(ids: ["k-0-0", "k-1-0"], negativeIds: ["k-1-1", "k-1-2"], strategy: BEST_SCORE,
                    limit: 10, page: 2, minScore: 0.5) { id score }
      c: collectionPage(ids: ["k-0-0"], negativeIds: ["k-2-0"], exhaustive: true, q: "kind:class", limit: 4) {
           totalResults hasNextPage results { id } }
      d: explore(id: "c-1-0", limit: 6, diversity: 1) { id }`);
    expect(g.errors).toBeUndefined();
    const v = g.data!.vision;
    expect(v.a).toEqual(
      entries(await ok('a', get('similar', 'id=c-1-0&limit=10&diversity=0.7&candidates=30'))),
    );
    expect(v.b).toEqual(
      entries(
        await ok(
          'b',
          get(
            'collection',
            'ids=k-0-0,k-1-0&negative_ids=k-1-1,k-1-2&strategy=best_score&limit=10&page=2&min_score=0.5',
          ),
        ),
      ),
    );
    const c = await ok(
      'c',
      get('collection', 'ids=k-0-0&negative_ids=k-2-0&exhaustive=true&q=kind:class&limit=4'),
    );
    expect(v.c.totalResults).toBe(c.body.total_results);
    expect(v.c.totalResults).toBe(CLASS_COUNT * PER_CLASS - 2);
    expect(v.c.hasNextPage).toBe(true);
    expect(v.c.results.map((x: { id: string }) => x.id)).toEqual(ids(entries(c)));
    expect(v.d.map((x: { id: string }) => x.id)).toEqual(
      ids(entries(await ok('d', get('explore', 'id=c-1-0&limit=6&diversity=1')))),
    );
  });

  test('a page too deep is the same 400 as REST', async () => {
    const e = onlyError(await vision('similarPage(id: "d-1", limit: 50, page: 21) { page }'));
    expect(e.extensions.code).toBe('invalid_request');
    expect(e.extensions.details?.[0]?.param).toBe('page');
  });
});
