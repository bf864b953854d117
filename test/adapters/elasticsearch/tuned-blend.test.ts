/**
 * Tuned similarity on Elasticsearch in the cases only it has (contract §20): the blend is read
 * back from one kNN over the blend field, whose stored vectors serve every weight; items the
 * pass has not written (or whose projection is zero) and an index that has no blend field yet
 * are ranked from the plain field. Every answer must be the brute-force §20 ranking. What every
 * engine shares is in test/e2e/tuned-similarity.test.ts.
 */
import { esClient } from '../../../src/adapters/elasticsearch/client';
import { esPorts } from '../../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../../src/adapters/elasticsearch/indices';
import { blend, project, type Projection } from '../../../src/domain/tuning/lda';
import { seededRandom } from '../../../src/lib/seeded-random';
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

/** The §20 scores of every other item for a query, best first (ties by id). */
function bruteForce(query: Float32Array, weight: number, exclude: string) {
  const zq = project(projection, query);
  const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, j) => s + x * b[j]!, 0);
  return [...vectors]
    .filter(([id]) => id !== exclude)
    .map(([id, v]) => ({
      id,
      score: (1 + blend(weight, dot(query, v), dot(zq, project(projection, v)))) / 2,
    }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

async function expectBruteForce(target: string, weight: number, limit: number, exact = false) {
  const query = vectors.get(target)!;
  const req: SimilarRequest = {
    vector: Array.from(query),
    embedder: EMBEDDER,
    conditions: [],
    limit,
    excludeIds: [target],
    tuning: tuning(weight),
    ...(exact ? { exact: true } : {}),
  };
  const hits = await engine.similar('d', req);
  const want = bruteForce(query, weight, target).slice(0, limit);
  expect(hits).toHaveLength(want.length);
  const own = new Map(bruteForce(query, weight, target).map((w) => [w.id, w.score]));
  hits.forEach((h, i) => {
    // the same scores in the same order; equal scores may trade places
    expect(h.score).toBeCloseTo(want[i]!.score, 5);
    expect(h.score).toBeCloseTo(own.get(h.item.id)!, 5);
  });
}

beforeAll(async () => {
  const jobs = await content.applyWrites(
    'd',
    [...vectors.keys()].map((id) => ({ id, url: `https://img.test/${id}.png`, metadata: {} })),
    'post',
    T0,
  );
  for (const job of jobs) {
    const features = {
      width: 4,
      height: 3,
      format: 'png' as const,
      vector: Array.from(vectors.get(job.itemId)!),
      embedder: EMBEDDER,
    };
    expect(await content.markProcessed(job, features, T0 + 1)).toBe(true);
  }
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
  let after: string | undefined;
  let written = 0;
  do {
    const page = await engine.applyTuning('d', EMBEDDER, DIMS, tuning(0.75), after, 64);
    written += page.changed;
    after = page.next;
  } while (after !== undefined);
  expect(written).toBe(300);
  await refresh();
  const stored = await client.search({
    index: indices.items('d'),
    size: 0,
    query: { exists: { field: `vector_blend_${DIMS + 3}` } },
  });
  // every item but the one projecting to zero holds a blend vector
  expect((stored.hits.total as { value: number }).value).toBe(299);
  // every weight, from the same stored vectors; the exhaustive ranking holds i007 too
  for (const weight of [0.75, 0.3, 1]) {
    await expectBruteForce('i001', weight, 20);
    await expectBruteForce('i002', weight, 299, true);
  }
});
