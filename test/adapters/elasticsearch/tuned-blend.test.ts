/**
 * Tuned similarity on Elasticsearch in the cases only it has (contract §20): the blend is read
 * back from one kNN over the blend field, whose stored vectors serve every weight; items the
 * pass has not written (or whose projection is zero) and an index that has no blend field yet
 * are ranked from the plain field. Every answer must be the brute-force §20 ranking. A merge
 * after the pass's rewrite leaves one segment. What every engine shares is in
 * test/e2e/tuned-similarity.test.ts.
 */
import { esClient } from '../../../src/adapters/elasticsearch/client';
import { esPorts } from '../../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../../src/adapters/elasticsearch/indices';
import { blend, project, type Projection } from '../../../src/domain/tuning/lda';
import { seededRandom } from '../../../src/lib/seeded-random';
import type { ProcessingJob } from '../../../src/domain/item';
import type { SimilarRequest, TunedQuery } from '../../../src/ports/search-engine';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T0 = Date.UTC(2026, 0, 1);
const DIMS = 8;
const EMBEDDER = 'test-emb';
const client = esClient(ES_URL);
const prefix = `b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
const { content, engine } = esPorts(indices, { vectorDims: DIMS });

const r = seededRandom(31);
const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
const unit = (v: number[]) => {
  const n = Math.hypot(...v);
  return Float32Array.from(v, (x) => x / n);
};
const vectors = new Map<string, Float32Array>(
  Array.from({ length: 300 }, (_, i) => [
    `i${String(i).padStart(3, '0')}`,
    unit(Array.from({ length: DIMS }, gauss)),
  ]),
);
/** A projection centred on item i007's own vector: that item projects to zero. */
const projection: Projection = {
  dims: DIMS,
  k: 3,
  mean: vectors.get('i007')!,
  basis: Float32Array.from({ length: DIMS * 3 }, gauss),
};
const model = 'model-1';
const tuning = (weight: number): TunedQuery => ({ model, projection, weight });

const refresh = () => client.indices.refresh({ index: indices.items('d') });

/** A dataset's items and the projection it ranks by. */
interface Case {
  dataset: string;
  items: Map<string, Float32Array>;
  tuning: (weight: number) => TunedQuery;
}
const d: Case = { dataset: 'd', items: vectors, tuning };

/** The §20 scores of every other item for a query, best first (ties by id). */
function bruteForce(c: Case, query: Float32Array, weight: number, exclude: string) {
  const { projection: p } = c.tuning(weight);
  const zq = project(p, query);
  const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, j) => s + x * b[j]!, 0);
  return [...c.items]
    .filter(([id]) => id !== exclude)
    .map(([id, v]) => ({
      id,
      score: (1 + blend(weight, dot(query, v), dot(zq, project(p, v)))) / 2,
    }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

/** Checks one request against the brute force; how many kNN searches answered it. */
async function expectBruteForce(
  target: string,
  weight: number,
  limit: number,
  exact = false,
  c: Case = d,
): Promise<number> {
  const query = c.items.get(target)!;
  const req: SimilarRequest = {
    vector: Array.from(query),
    embedder: EMBEDDER,
    conditions: [],
    limit,
    excludeIds: [target],
    tuning: c.tuning(weight),
    ...(exact ? { exact: true } : {}),
  };
  const before = knnSearches;
  const hits = await engine.similar(c.dataset, req);
  const searched = knnSearches - before;
  const want = bruteForce(c, query, weight, target).slice(0, limit);
  expect(hits).toHaveLength(want.length);
  const own = new Map(bruteForce(c, query, weight, target).map((w) => [w.id, w.score]));
  hits.forEach((h, i) => {
    // the same scores in the same order; equal scores may trade places
    expect(h.score).toBeCloseTo(want[i]!.score, 5);
    expect(h.score).toBeCloseTo(own.get(h.item.id)!, 5);
  });
  return searched;
}

/** kNN searches the client has sent (counted when sent, so a request's own are all in). */
let knnSearches = 0;
client.diagnostic.on('request', (_e, r) => {
  const body = r?.meta.request.params.body;
  if (typeof body === 'string' && body.includes('"knn"')) knnSearches++;
});

const writeItems = (dataset: string, items: Map<string, Float32Array>) =>
  content.applyWrites(
    dataset,
    [...items.keys()].map((id) => ({ id, url: `https://img.test/${id}.png`, metadata: {} })),
    'post',
    T0,
  );

/** Processes the items' jobs as a worker does, with `withTuning` stored at once if given. */
async function processJobs(
  jobs: ProcessingJob[],
  items: Map<string, Float32Array>,
  withTuning?: TunedQuery,
) {
  for (const job of jobs) {
    const features = {
      width: 4,
      height: 3,
      format: 'png' as const,
      vector: Array.from(items.get(job.itemId)!),
      embedder: EMBEDDER,
    };
    expect(await content.markProcessed(job, features, T0 + 1, withTuning)).toBe(true);
  }
}

/** Runs the pass's writes over the whole dataset; how many items it wrote. */
async function pass(dataset: string, t: TunedQuery): Promise<number> {
  let after: string | undefined;
  let written = 0;
  do {
    const page = await engine.applyTuning(dataset, EMBEDDER, DIMS, t, after, 64);
    written += page.changed;
    after = page.next;
  } while (after !== undefined);
  return written;
}

const blendVectors = async (dataset: string) =>
  (
    (
      await client.search({
        index: indices.items(dataset),
        size: 0,
        query: { exists: { field: `vector_blend_${DIMS + 3}` } },
      })
    ).hits.total as { value: number }
  ).value;

beforeAll(async () => {
  await processJobs(await writeItems('d', vectors), vectors);
  await refresh();
}, 120_000);

afterAll(async () => {
  await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
  await client.indices.deleteIndexTemplate({ name: `${prefix}items` }).catch(() => undefined);
  await client.close();
});

test('before any pass (no blend field in the index) every item ranks by the blend', async () => {
  await expectBruteForce('i001', 0.75, 20);
  await expectBruteForce('i002', 0.75, 299, true);
});

test('after the pass, one kNN ranks by the blend at every weight, zero projection included', async () => {
  expect(await pass('d', tuning(0.75))).toBe(300);
  await refresh();
  // every item but the one projecting to zero holds a blend vector
  expect(await blendVectors('d')).toBe(299);
  // every weight, from the same stored vectors; the exhaustive ranking holds i007 too (which
  // the search over the plain field finds, so that search runs beside the blend's)
  for (const weight of [0.75, 0.3, 1]) {
    expect(await expectBruteForce('i001', weight, 20)).toBe(2);
    await expectBruteForce('i002', weight, 299, true);
  }
});

describe('items a worker stores with the projection', () => {
  /** Centred at the origin: no item projects to zero. */
  const p2: Projection = { ...projection, mean: new Float32Array(DIMS) };
  const e: Case = {
    dataset: 'e',
    items: new Map([...vectors].slice(0, 120)),
    tuning: (weight) => ({ model: 'model-2', projection: p2, weight }),
  };

  test('rank at once by one kNN; an item written without it ranks within a second, then the pass writes it', async () => {
    const jobs = await writeItems('e', e.items);
    // the pass has mapped the field (and found nothing processed) before tuning turned on
    expect(await pass('e', e.tuning(0.75))).toBe(0);
    await processJobs(jobs, e.items, e.tuning(0.75));
    await client.indices.refresh({ index: indices.items('e') });
    expect(await blendVectors('e')).toBe(120);
    expect(await expectBruteForce('i010', 0.75, 20, false, e)).toBe(1);
    expect(await expectBruteForce('i011', 0.75, 20, false, e)).toBe(1);

    // a worker that read the setting before this fit: the new item, i010's near twin, lacks it
    const twin = unit(Array.from(e.items.get('i010')!, (x) => x + 0.01 * gauss()));
    e.items.set('i999', twin);
    const late = new Map([['i999', twin]]);
    await processJobs(await writeItems('e', late), late);
    await client.indices.refresh({ index: indices.items('e') });
    const seen = Date.now();
    let found = false;
    while (!found && Date.now() - seen < 3000) {
      const hits = await engine.similar('e', {
        vector: Array.from(e.items.get('i010')!),
        embedder: EMBEDDER,
        conditions: [],
        limit: 5,
        excludeIds: ['i010'],
        tuning: e.tuning(0.75),
      });
      found = hits.some((h) => h.item.id === 'i999');
    }
    expect(found).toBe(true);
    expect(await expectBruteForce('i010', 0.75, 20, false, e)).toBe(2);

    expect(await pass('e', e.tuning(0.75))).toBe(1);
    await client.indices.refresh({ index: indices.items('e') });
    expect(await blendVectors('e')).toBe(121);
    let searches = 2;
    const written = Date.now();
    while (searches !== 1 && Date.now() - written < 3000)
      searches = await expectBruteForce('i010', 0.75, 20, false, e);
    expect(searches).toBe(1);
    await expectBruteForce('i012', 0.3, 120, true, e);
  });

  test('an index without the blend field takes the item without it, for the pass to write', async () => {
    const f: Case = { ...e, dataset: 'f', items: new Map([...vectors].slice(0, 30)) };
    await processJobs(await writeItems('f', f.items), f.items, f.tuning(0.75));
    await client.indices.refresh({ index: indices.items('f') });
    expect(await blendVectors('f')).toBe(0);
    await expectBruteForce('i003', 0.75, 10, false, f);
    expect(await pass('f', f.tuning(0.75))).toBe(30);
  });
});

describe('the merge after a rewrite', () => {
  const g: Case = { ...d, dataset: 'g', items: new Map([...vectors].slice(0, 90)) };
  const shape = async () => {
    const p = (
      await client.indices.stats({ index: indices.items('g'), metric: ['docs', 'segments'] })
    )._all.primaries!;
    return { segments: p.segments!.count, deleted: p.docs!.deleted };
  };

  test('leaves one segment, and the blend ranking as it was', async () => {
    // three refreshed batches leave three segments or more; the rewrite deletes what they hold
    const batches = [0, 30, 60].map((at) => new Map([...g.items].slice(at, at + 30)));
    for (const b of batches) {
      await processJobs(await writeItems('g', b), b);
      await client.indices.refresh({ index: indices.items('g') });
    }
    expect(await pass('g', g.tuning(0.75))).toBe(90);
    await client.indices.refresh({ index: indices.items('g') });
    const before = await shape();
    expect(before.segments).toBeGreaterThan(1);
    expect(before.deleted).toBeGreaterThan(0);

    let asked = 0;
    expect(await engine.compact('g', async () => (asked++, true))).toBe(true);
    expect(asked).toBeGreaterThan(0);
    // deleted documents may stay a while: Elasticsearch keeps recent ones for shard recovery
    expect((await shape()).segments).toBe(1);
    await expectBruteForce('i004', 0.75, 20, false, g);
    await expectBruteForce('i005', 0.3, 89, true, g);
  });

  test('stops waiting when asked to, and answers for an index that does not exist', async () => {
    const h = new Map([...vectors].slice(0, 5));
    await processJobs(await writeItems('h', h), h);
    expect(await engine.compact('h', async () => false)).toBe(false);
    expect(await engine.compact('never-written', async () => true)).toBe(true);
  });
});
