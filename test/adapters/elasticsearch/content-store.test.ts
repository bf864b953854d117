/**
 * The Elasticsearch content store and search engine in the cases only it has: shards that cannot
 * answer, bulks refused or cut off half-way, its compact embedding copy and the shared requests
 * of grouped worker results. The cases every engine shares are in test/contract/content-store.
 */
import { Client } from '@elastic/elasticsearch';
import { esClient } from '../../../src/adapters/elasticsearch/client';
import { esPorts } from '../../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../../src/adapters/elasticsearch/indices';
import { itemMapping } from '../../../src/adapters/elasticsearch/mapping';
import type { ContentWrite } from '../../../src/domain/content';
import { PartialWrite, type ContentStore } from '../../../src/ports/content-store';
import type { SearchEngine } from '../../../src/ports/search-engine';
import { startAnswerDroppingProxy } from '../../helpers/answer-dropping-proxy';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T0 = Date.UTC(2026, 0, 1);
const DIMS = 8;
const features = {
  width: 40,
  height: 30,
  format: 'png' as const,
  vector: Array.from({ length: DIMS }, (_, i) => (i === 0 ? 1 : 0)),
  embedder: 'test-emb',
};
const url = (id: string, v = 1): string => `https://img.test/${id}-v${v}.png`;

/** A store on indices of its own in the local Elasticsearch, removed afterwards. */
async function withEsStore(
  fn: (es: {
    client: Client;
    indices: EsIndices;
    store: ContentStore;
    engine: SearchEngine;
  }) => Promise<void>,
): Promise<void> {
  const client = esClient(ES_URL);
  const prefix = `e${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
  const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
  try {
    const { content: store, engine } = esPorts(indices, { vectorDims: DIMS });
    await fn({ client, indices, store, engine });
  } finally {
    await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
    await client.indices.deleteIndexTemplate({ name: `${prefix}items` }).catch(() => undefined);
    await client.close();
  }
}

/** How many requests the client sends from now on whose path ends with `suffix`. */
function counting(client: Client, suffix: string): () => number {
  let n = 0;
  client.diagnostic.on('request', (_e, r) => {
    if (r?.meta.request.params.path.endsWith(suffix)) n++;
  });
  return () => n;
}

/** New items `ids` in dataset 'd', each with its own url. */
const writeNew = (store: ContentStore, ids: string[]) =>
  store.applyWrites(
    'd',
    ids.map((id) => ({ id, url: url(id) })),
    'post',
    T0,
  );

describe('Elasticsearch item reads', () => {
  test('an item index that cannot be read is a 503, never "not found" (a worker would drop its job)', async () => {
    await withEsStore(async ({ client, indices, store }) => {
      await store.applyWrites('d', [{ id: 'a', url: url('a') }], 'post', T0);
      // a closed index answers every document of an mget with an error of its own
      await client.indices.close({ index: indices.items('d') });
      for (const read of [
        () => store.getItems('d', ['a'], { latest: true }),
        () => store.existingIds('d', ['a']),
        () => store.getEmbedding('d', 'a', { latest: true }),
      ])
        await expect(read()).rejects.toMatchObject({ code: 'unavailable' });
    });
  });
});

describe('Elasticsearch reads while shards are missing', () => {
  test('a sweep, a search or a count that some shard cannot answer is a 503, never a short answer', async () => {
    await withEsStore(async ({ client, indices, store, engine }) => {
      await store.applyWrites('d', [{ id: 'a', url: url('a') }], 'post', T0);
      // another dataset's index with two primaries and room for one: half of it is missing,
      // as while a cluster recovers
      await client.indices.create({
        index: indices.items('half'),
        wait_for_active_shards: 0,
        settings: {
          number_of_shards: 2,
          number_of_replicas: 0,
          'index.routing.allocation.total_shards_per_node': 1,
        },
      });
      // the sweep over every item index would find 'a' and say nothing of the rest
      await expect(store.pendingJobs(undefined, 100)).rejects.toMatchObject({
        code: 'unavailable',
      });
      await expect(store.staleEmbeddingCount('half', 'x')).rejects.toMatchObject({
        code: 'unavailable',
      });
      await expect(
        engine.search('half', {
          conditions: [],
          sort: { field: 'id', order: 'asc' },
          offset: 0,
          limit: 5,
        }),
      ).rejects.toMatchObject({ code: 'unavailable' });
      // once every index answers, the sweep finds the item
      await client.indices.delete({ index: indices.items('half') });
      expect((await store.pendingJobs(undefined, 100)).jobs.map((j) => j.itemId)).toEqual(['a']);
    });
  });
});

describe('Elasticsearch item writes', () => {
  test('a batch refused half-way reports the jobs of the items it did write', async () => {
    await withEsStore(async ({ client, indices, store }) => {
      await store.applyWrites('d', [{ id: 'seed', url: url('seed') }], 'post', T0);
      // Each metadata value is a nested document: past this limit the engine refuses the item
      // alone, as a real cluster refuses some items of a bulk (a full queue, a moving shard).
      await client.indices.putSettings({
        index: indices.items('d'),
        settings: { 'index.mapping.nested_objects.limit': 3 },
      });
      const many = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, i]));
      const writes: ContentWrite[] = [
        { id: 'small-1', url: url('small-1'), metadata: { k: 1 } },
        { id: 'big', url: url('big'), metadata: many },
        { id: 'small-2', url: url('small-2'), metadata: { k: 2 } },
      ];
      const err = await store.applyWrites('d', writes, 'post', T0).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PartialWrite);
      expect(err).toMatchObject({ code: 'unavailable' });
      expect((err as PartialWrite).written.map((j) => j.itemId).sort()).toEqual([
        'small-1',
        'small-2',
      ]);
      // Once the engine accepts it again, the same request is safe and queues every job.
      await client.indices.putSettings({
        index: indices.items('d'),
        settings: { 'index.mapping.nested_objects.limit': 10_000 },
      });
      const jobs = await store.applyWrites('d', writes, 'post', T0);
      expect(jobs.map((j) => j.itemId).sort()).toEqual(['big', 'small-1', 'small-2']);
    });
  });
  test('a bulk whose answer is lost still gives every item it may have written its job', async () => {
    await withEsStore(async ({ indices }) => {
      // every _bulk reaches Elasticsearch; its answer is cut off on the way back
      const proxy = await startAnswerDroppingProxy(ES_URL, (_m, p) => p.includes('_bulk'));
      const client = new Client({ node: proxy.url, maxRetries: 1 });
      try {
        const { content: store } = esPorts(
          new EsIndices(client, indices.prefix, { shards: 1, replicas: 0 }),
          { vectorDims: DIMS },
        );
        const writes: ContentWrite[] = ['a', 'b', 'c'].map((id) => ({ id, url: url(id) }));
        const err = await store.applyWrites('d', writes, 'post', T0).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PartialWrite);
        expect(proxy.dropped).toBeGreaterThan(0);
        expect((err as PartialWrite).written.map((j) => j.itemId).sort()).toEqual(['a', 'b', 'c']);
        // they were written: without their jobs they would wait for the next sweep
        const { content: direct } = esPorts(indices, { vectorDims: DIMS });
        expect([...(await direct.existingIds('d', ['a', 'b', 'c']))].sort()).toEqual([
          'a',
          'b',
          'c',
        ]);
      } finally {
        await client.close();
        await proxy.close();
      }
    });
  });
});

describe('Elasticsearch embedding storage', () => {
  const odd = Array.from({ length: DIMS }, (_, i) => Math.fround(Math.sin(i + 1) / 3));
  const processed = async (store: ContentStore, id: string) => {
    const [job] = await store.applyWrites('d', [{ id, url: url(id) }], 'post', T0);
    expect(await store.markProcessed(job!, { ...features, vector: odd }, T0 + 1)).toBe(true);
  };

  test('the stored _source keeps a compact copy, not the HNSW field; reads get the vector bit for bit', async () => {
    await withEsStore(async ({ client, indices, store }) => {
      await processed(store, 'a');
      const raw = await client.get<Record<string, unknown>>({ index: indices.items('d'), id: 'a' });
      expect(Object.keys(raw._source!).filter((k) => k.startsWith('vector_'))).toEqual([]);
      expect(typeof raw._source!.embedding_f32).toBe('string');
      expect((await store.getEmbedding('d', 'a', { latest: true }))?.vector).toEqual(odd);
      // a re-post of the same url keeps the embedding through the read-modify-write
      await store.applyWrites('d', [{ id: 'a', url: url('a'), metadata: { k: 1 } }], 'post', T0);
      expect((await store.getEmbedding('d', 'a', { latest: true }))?.vector).toEqual(odd);
    });
  });

  test('an index made before the compact copy: its vectors are read, and it takes the field at start', async () => {
    await withEsStore(async ({ client, indices, store }) => {
      // the previous layout: no _source excludes, no embedding_f32 field, the vector in _source
      const index = indices.items('d');
      const { _source: _dropped, ...current } = itemMapping(DIMS) as {
        _source: unknown;
        properties: Record<string, unknown>;
      };
      const { embedding_f32: _absent, ...properties } = current.properties;
      await client.indices.create({ index, mappings: { ...current, properties } as never });
      await client.index({
        index,
        id: 'old',
        refresh: true,
        document: {
          dataset: 'd',
          id: 'old',
          url: url('old'),
          state: 'processed',
          created_at: T0,
          updated_at: T0,
          metadata: {},
          private_metadata: {},
          image: { width: 1, height: 1, url: url('old') },
          error: null,
          has_error: false,
          terms: [],
          attrs: [],
          embedder: features.embedder,
          [`vector_${DIMS}`]: odd,
        },
      });
      expect((await store.getEmbedding('d', 'old'))?.vector).toEqual(odd);
      // before the start-up step, a write carrying the embedding is refused by the strict mapping
      const repost = () => store.applyWrites('d', [{ id: 'old', url: url('old') }], 'post', T0);
      await expect(repost()).rejects.toBeDefined();
      await indices.ensureItemTemplate(DIMS);
      await repost();
      expect((await store.getEmbedding('d', 'old', { latest: true }))?.vector).toEqual(odd);
    });
  });
});

describe('Elasticsearch grouped results', () => {
  test("a worker's result is written against its own read of the item, and a change since still wins", async () => {
    await withEsStore(async ({ client, store }) => {
      const [a, b] = await writeNew(store, ['a', 'b']);
      await store.getItems('d', ['a'], { latest: true });
      await store.getItems('d', ['b'], { latest: true });
      // b changes after the worker read it: its remembered version is stale
      await store.applyWrites('d', [{ id: 'b', url: url('b', 2) }], 'put', T0 + 1);
      const reads = counting(client, '/_mget');
      expect(await store.markProcessed(a!, features, T0 + 2)).toBe(true);
      expect(reads()).toBe(0);
      // the versioned write conflicts, the item is read again, and the old url's result is dropped
      expect(await store.markProcessed(b!, features, T0 + 2)).toBe(false);
      expect(reads()).toBeGreaterThan(0);
      const [item] = await store.getItems('d', ['b'], { latest: true });
      expect(item).toMatchObject({ url: url('b', 2), state: 'pending' });
    });
  });

  test("a worker's result for a dataset deleted after its read changes nothing and makes no index", async () => {
    await withEsStore(async ({ client, indices, store }) => {
      await indices.ensureItemTemplate(DIMS);
      const [job] = await store.applyWrites('d', [{ id: 'x', url: url('x') }], 'post', T0);
      await store.getItems('d', ['x'], { latest: true });
      await store.dropDataset('d');
      expect(await store.markProcessed(job!, features, T0 + 1)).toBe(false);
      expect(await client.indices.exists({ index: indices.items('d') })).toBe(false);
    });
  });

  test("workers' single-item realtime reads asked together share an mget, each answered its own item", async () => {
    await withEsStore(async ({ client, store }) => {
      const ids = Array.from({ length: 20 }, (_, i) => `r${i}`);
      await writeNew(store, ids);
      const mgets = counting(client, '/_mget');
      const read = await Promise.all(
        [...ids, 'absent'].map((id) => store.getItems('d', [id], { latest: true })),
      );
      expect(read.map((r) => r.map((i) => i.id))).toEqual([...ids.map((id) => [id]), []]);
      // the first read goes at once, the other 20 wait for it and go together
      expect(mgets()).toBeLessThanOrEqual(2);
    });
  });

  test('results finished together are stored in shared requests, each settled by its own outcome', async () => {
    await withEsStore(async ({ client, store }) => {
      const ids = Array.from({ length: 40 }, (_, i) => `g${i}`);
      const jobs = await writeNew(store, ids);
      const bulks = counting(client, '/_bulk');
      const stale = { ...jobs[0]!, url: url('g0', 2) }; // a job for a url the item no longer has
      const results = await Promise.all([
        ...jobs.map((j) => store.markProcessed(j, features, T0 + 1)),
        store.markProcessed(stale, features, T0 + 1),
        store.markProcessed(jobs[1]!, features, T0 + 2), // the same item twice: once only
      ]);
      expect(results.slice(0, 40)).toEqual(ids.map(() => true));
      expect(results.slice(40)).toEqual([false, false]);
      expect(bulks()).toBeGreaterThan(0);
      expect(bulks()).toBeLessThan(10);
      // counts read the refreshed view
      const deadline = Date.now() + 5000;
      while ((await store.counts('d')).processed < 40 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect((await store.counts('d')).processed).toBe(40);
      expect((await store.getEmbedding('d', 'g39', { latest: true }))?.vector).toEqual(
        features.vector,
      );
    });
  });
});
