/**
 * One set of cases for every ContentStore + SearchEngine adapter: the embedded SQLite engine and
 * Elasticsearch on the real local server (started by scripts/services.sh).
 */
import { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import { itemMapping } from '../../src/adapters/elasticsearch/mapping';
import type { ContentWrite } from '../../src/domain/content';
import type { ProcessingJob } from '../../src/domain/item';
import type { Condition } from '../../src/query/ast';
import { PartialWrite, type ContentStore } from '../../src/ports/content-store';
import type { SearchEngine } from '../../src/ports/search-engine';
import { startAnswerDroppingProxy } from '../helpers/answer-dropping-proxy';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';

interface Engines {
  /** What the service does at start before any request (the item template on Elasticsearch). */
  ready?: Promise<void>;
  store: ContentStore;
  engine: SearchEngine;
  /** The same data as a process whose embedder makes vectors of `dims` would see it. */
  sized(dims: number): { store: ContentStore; engine: SearchEngine };
  close(): Promise<void>;
}

const adapters = tierOf<() => Engines>({
  local: [
    'embedded (SQLite)',
    () => {
      const dir = tempDir('vss-store-');
      const db = openDb(path.join(dir, 'store.db'));
      const { content: store, engine } = embeddedPorts(db, dir);
      return {
        store,
        engine,
        sized: () => ({ store, engine }),
        close: async () => {
          db.close();
        },
      };
    },
  ],
  services: [
    'Elasticsearch',
    () => {
      const client = esClient(ES_URL);
      const prefix = `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      const { content: store, engine } = esPorts(indices, { vectorDims: DIMS });
      return {
        // as the container does at start: no write may create an item index by itself
        ready: indices.ensureItemTemplate(DIMS),
        store,
        engine,
        sized: (dims) => {
          const other = esPorts(indices, { vectorDims: dims });
          return { store: other.content, engine: other.engine };
        },
        close: async () => {
          await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await client.indices
            .deleteIndexTemplate({ name: `${prefix}items` })
            .catch(() => undefined);
          await client.close();
        },
      };
    },
  ],
});

const T0 = Date.UTC(2026, 0, 1);
const DIMS = 8;
const EMB = 'test-emb';
/** A unit vector pointing mostly along axis `k` (and a little along `k + 1`). */
const axis = (k: number, tilt = 0): number[] => {
  const v = Array.from({ length: DIMS }, (_, i) => (i === k ? 1 : i === (k + 1) % DIMS ? tilt : 0));
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
const features = {
  width: 40,
  height: 30,
  format: 'png' as const,
  vector: axis(0),
  embedder: EMB,
};
const url = (id: string, v = 1): string => `https://img.test/${id}-v${v}.png`;

describe.each(adapters)('ContentStore + SearchEngine contract: %s', (_name, make) => {
  let e: Engines;
  let ds: string;
  beforeEach(async () => {
    e = make();
    ds = `ds${Math.random().toString(36).slice(2, 10)}`;
    await e.ready;
  });
  afterEach(() => e.close());

  const write = (writes: ContentWrite[], mode: 'post' | 'put' = 'post'): Promise<ProcessingJob[]> =>
    e.store.applyWrites(ds, writes, mode, T0);

  /**
   * Results become visible to counts/search at the engine's next refresh (about a second on
   * Elasticsearch), as contract §4 allows; wait for that instead of forcing a refresh per write.
   */
  async function settled(pending = 0): Promise<void> {
    const deadline = Date.now() + 5000;
    while ((await e.store.counts(ds)).pending > pending) {
      if (Date.now() > deadline) throw new Error(`dataset ${ds} still has pending items after 5 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function processAll(jobs: ProcessingJob[]): Promise<void> {
    for (const j of jobs) expect(await e.store.markProcessed(j, features, T0 + 1)).toBe(true);
    await settled();
  }

  const search = (conditions: Condition[], field = 'id', order: 'asc' | 'desc' = 'asc') =>
    e.engine.search(ds, { conditions, sort: { field, order }, offset: 0, limit: 50 });

  test('an accepted item is listed at once as unprocessed and needs one job', async () => {
    const jobs = await write([{ id: 'a', url: url('a'), metadata: { color: 'red' } }]);
    expect(jobs).toEqual([{ datasetId: ds, itemId: 'a', url: url('a'), attempt: 1 }]);
    expect(await e.store.list(ds, 0, 10)).toEqual([{ id: 'a', url: url('a'), processed: false }]);
    expect(await e.store.counts(ds)).toEqual({ items: 1, processed: 0, pending: 1, errors: 0 });
    expect((await search([])).total).toBe(0); // search sees processed items only
    await processAll(jobs);
    const { items, total } = await search([]);
    expect(total).toBe(1);
    expect(items[0]).toMatchObject({ id: 'a', state: 'processed', image: { width: 40 } });
  });

  test('a job for an old url never overwrites the result for the new one', async () => {
    const [old] = await write([{ id: 'a', url: url('a', 1) }]);
    const [fresh] = await write([{ id: 'a', url: url('a', 2) }], 'put');
    expect(fresh!.url).toBe(url('a', 2));
    expect(await e.store.markProcessed(old!, { ...features, width: 999 }, T0)).toBe(false);
    expect(await e.store.markFailed(old!, { code: 'timeout', message: 'x', attempts: 4 }, T0)).toBe(
      false,
    );
    const [item] = await e.store.getItems(ds, ['a']);
    expect(item).toMatchObject({ url: url('a', 2), state: 'pending' });
    expect(await e.store.markProcessed(fresh!, features, T0)).toBe(true);
    await settled();
    // processedAt names this processing for the image ledger (contract §8)
    expect((await e.store.getItems(ds, ['a']))[0]!.image).toEqual({
      width: 40,
      height: 30,
      url: url('a', 2),
      processedAt: T0,
    });
  });

  test('processing succeeds once: a redelivered job reports no change', async () => {
    const jobs = await write([{ id: 'a', url: url('a') }]);
    expect(await e.store.markProcessed(jobs[0]!, features, T0)).toBe(true);
    expect(await e.store.markProcessed(jobs[0]!, features, T0)).toBe(false);
    await settled();
    expect(await e.store.counts(ds)).toMatchObject({ processed: 1, pending: 0 });
  });

  test('concurrent results for the same job: exactly one wins', async () => {
    const [job] = await write([{ id: 'a', url: url('a') }]);
    const results = await Promise.all(
      Array.from({ length: 6 }, () => e.store.markProcessed(job!, features, T0)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  test('re-writing the same url needs no new job; metadata alone changes', async () => {
    const jobs = await write([{ id: 'a', url: url('a'), metadata: { n: 1 } }]);
    await processAll(jobs);
    expect(await write([{ id: 'a', url: url('a'), metadata: { n: 2 } }])).toEqual([]);
    expect((await e.store.getItems(ds, ['a']))[0]).toMatchObject({
      state: 'processed',
      metadata: { n: 2 },
    });
  });

  test('sending a write again for an item still pending queues its job again (its first may be lost)', async () => {
    const first = await write([
      { id: 'a', url: url('a') },
      { id: 'b', url: url('b') },
    ]);
    expect(first).toHaveLength(2);
    const again = await write([{ id: 'a', url: url('a') }]);
    expect(again).toEqual([{ datasetId: ds, itemId: 'a', url: url('a'), attempt: 1 }]);
    // A later metadata-only write in the same batch keeps the job of an earlier url write.
    const batch = await write([
      { id: 'c', url: url('c') },
      { id: 'c', metadata: { n: 1 } },
    ]);
    expect(batch.map((j) => j.itemId)).toEqual(['c']);
    expect(await write([{ id: 'b', metadata: { n: 2 } }], 'put')).toHaveLength(1);
  });

  test('a key may be a number on one item and a string on another; ranges compare numbers', async () => {
    const jobs = await write([
      { id: 'a', url: url('a'), metadata: { size: 10 } },
      { id: 'b', url: url('b'), metadata: { size: 'XL' } },
      { id: 'c', url: url('c'), metadata: { size: 9 } },
      { id: 'd', url: url('d'), metadata: { size: 100 } },
    ]);
    await processAll(jobs);
    const ids = async (c: Condition[]): Promise<string[]> =>
      (await search(c)).items.map((i) => i.id);
    expect(await ids([{ kind: 'range', field: 'size', gte: 9, lte: 10 }])).toEqual(['a', 'c']);
    expect(await ids([{ kind: 'range', field: 'size', gte: 50 }])).toEqual(['d']);
    expect(await ids([{ kind: 'match', field: 'size', values: ['XL'] }])).toEqual(['b']);
    expect(await ids([{ kind: 'match', field: 'size', values: ['10'] }])).toEqual(['a']);
    // numbers sort as numbers, and items without a number for the key sort last
    expect((await search([], 'size', 'asc')).items.map((i) => i.id).slice(0, 3)).toEqual([
      'c',
      'a',
      'd',
    ]);
  });

  test('a dataset with thousands of distinct keys stays searchable and harms no other', async () => {
    const wide: ContentWrite[] = Array.from({ length: 20 }, (_, i) => ({
      id: `w${i}`,
      url: url(`w${i}`),
      metadata: Object.fromEntries(Array.from({ length: 200 }, (_, k) => [`k${i}_${k}`, k])),
    }));
    await processAll(await write(wide));
    const hit = await search([{ kind: 'range', field: 'k19_199', gte: 199 }]);
    expect(hit.items.map((i) => i.id)).toEqual(['w19']);
    const other = ds;
    ds = `${other}x`;
    await processAll(await write([{ id: 'z', url: url('z'), metadata: { color: 'red' } }]));
    expect((await search([{ kind: 'match', field: 'color', values: ['red'] }])).total).toBe(1);
  });

  test('listing is in code point order at any offset, and the pending sweep sees each once', async () => {
    const ids = Array.from({ length: 120 }, (_, i) => `id-${String(i).padStart(3, '0')}`);
    ids.push('Z', 'a', 'é');
    await write(ids.map((id) => ({ id, url: url(id) })));
    const sorted = [...ids].sort();
    expect((await e.store.list(ds, 0, 200)).map((r) => r.id)).toEqual(sorted);
    expect((await e.store.list(ds, 117, 5)).map((r) => r.id)).toEqual(sorted.slice(117, 122));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const { jobs, next } = await e.store.pendingJobs(cursor, 50);
      seen.push(...jobs.filter((j) => j.datasetId === ds).map((j) => j.itemId));
      if (next === undefined) break;
      cursor = next;
    }
    expect(seen.sort()).toEqual(sorted);
  });

  test('failures are recorded with their code and leave the pending count', async () => {
    const [job] = await write([{ id: 'a', url: url('a') }]);
    const failure = { code: 'not_found' as const, message: 'HTTP 404', attempts: 1 };
    expect(await e.store.markFailed(job!, failure, T0)).toBe(true);
    await settled();
    expect(await e.store.counts(ds)).toEqual({ items: 1, processed: 0, pending: 0, errors: 1 });
    const { errors, total } = await e.store.listErrors(ds, 0, 10);
    expect(total).toBe(1);
    expect(errors[0]).toMatchObject({ id: 'a', url: url('a'), code: 'not_found', attempts: 1 });
  });

  test('a postponed item stays pending with its reason, and processing clears the reason', async () => {
    const [job] = await write([{ id: 'a', url: url('a') }]);
    const failure = { code: 'quota_postponed' as const, message: 'limit', attempts: 1 };
    expect(await e.store.markPostponed(job!, failure, T0)).toBe(true);
    expect(await e.store.markPostponed({ ...job!, url: url('a', 9) }, failure, T0)).toBe(false);
    const deadline = Date.now() + 5000;
    while ((await e.store.counts(ds)).errors === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(await e.store.counts(ds)).toEqual({ items: 1, processed: 0, pending: 1, errors: 1 });
    expect((await e.store.listErrors(ds, 0, 10)).errors[0]).toMatchObject({
      id: 'a',
      code: 'quota_postponed',
    });
    const { jobs } = await e.store.pendingJobs(undefined, 1000);
    expect(jobs.filter((j) => j.datasetId === ds).map((j) => j.itemId)).toEqual(['a']);
    await processAll([job!]);
    expect(await e.store.counts(ds)).toEqual({ items: 1, processed: 1, pending: 0, errors: 0 });
  });

  test('similar: nearest first with 0–1 scores, filtered inside the search, ids excluded', async () => {
    const jobs = await write([
      { id: 'a', url: url('a'), metadata: { color: 'red' } },
      { id: 'b', url: url('b'), metadata: { color: 'red' } },
      { id: 'c', url: url('c'), metadata: { color: 'blue' } },
      { id: 'd', url: url('d'), metadata: { color: 'red' } },
      { id: 'p', url: url('p'), metadata: { color: 'red' } }, // stays pending
    ]);
    const vec: Record<string, number[]> = {
      a: axis(0),
      b: axis(0, 0.2),
      c: axis(0, 0.1),
      d: axis(3),
    };
    for (const j of jobs.filter((x) => x.itemId !== 'p'))
      expect(await e.store.markProcessed(j, { ...features, vector: vec[j.itemId]! }, T0)).toBe(
        true,
      );
    await settled(1);
    expect(await e.store.getEmbedding(ds, 'a')).toEqual({
      embedder: EMB,
      vector: expect.any(Array),
    });
    expect(await e.store.getEmbedding(ds, 'p')).toBeUndefined();
    const q = (await e.store.getEmbedding(ds, 'a'))?.vector;
    for (const [x, y] of q!.map((x, i) => [x, axis(0)[i]!])) expect(x).toBeCloseTo(y, 5);

    const hits = await e.engine.similar(ds, {
      vector: q!,
      embedder: EMB,
      conditions: [],
      limit: 10,
      excludeIds: ['a'],
    });
    expect(hits.map((h) => h.item.id)).toEqual(['c', 'b', 'd']);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect(hits[2]!.score).toBeCloseTo(0.5, 3); // orthogonal: cosine 0
    for (const h of hits) expect(h.score).toBeLessThanOrEqual(1);

    const red = await e.engine.similar(ds, {
      vector: q!,
      embedder: EMB,
      conditions: [{ kind: 'match', field: 'color', values: ['red'] }],
      limit: 2,
      excludeIds: ['a'],
    });
    expect(red.map((h) => h.item.id)).toEqual(['b', 'd']); // c is nearer but blue
    const other = await e.engine.similar(ds, {
      vector: q!,
      embedder: 'another-model',
      conditions: [],
      limit: 5,
      excludeIds: [],
    });
    expect(other).toEqual([]);
  });

  test('a url change drops the old embedding; sample draws matching processed items', async () => {
    const jobs = await write([
      { id: 'a', url: url('a'), metadata: { n: 1 } },
      { id: 'b', url: url('b'), metadata: { n: 2 } },
      { id: 'c', url: url('c'), metadata: { n: 3 } },
    ]);
    await processAll(jobs);
    const s1 = await e.engine.sample(ds, [{ kind: 'range', field: 'n', gte: 2 }], 10, 42);
    expect(s1.map((i) => i.id).sort()).toEqual(['b', 'c']);
    expect((await e.engine.sample(ds, [], 2, 7)).length).toBe(2);
    const all = { vector: axis(0), embedder: EMB, conditions: [], limit: 10, excludeIds: [] };
    expect((await e.engine.similar(ds, all)).map((h) => h.item.id).sort()).toEqual(['a', 'b', 'c']);
    await write([{ id: 'a', url: url('a', 2) }], 'put');
    await settled(1);
    expect(await e.store.getEmbedding(ds, 'a')).toBeUndefined();
    const hits = await e.engine.similar(ds, {
      vector: axis(0),
      embedder: EMB,
      conditions: [],
      limit: 10,
      excludeIds: [],
    });
    expect(hits.map((h) => h.item.id).sort()).toEqual(['b', 'c']);
  });

  test('an embedder change: stale items listed, re-embedded with another size, searchable again', async () => {
    const jobs = await write([
      { id: 'a', url: url('a'), metadata: { color: 'red' } },
      { id: 'b', url: url('b'), metadata: { color: 'blue' } },
      { id: 'c', url: url('c'), metadata: { color: 'red' } },
      { id: 'p', url: url('p') }, // pending: not stale, it is processed with the new embedder
    ]);
    for (const j of jobs.filter((x) => x.itemId !== 'p'))
      expect(await e.store.markProcessed(j, features, T0 + 1)).toBe(true);
    await settled(1);
    const NEW = 'wide-emb';
    const stale = async () => {
      const out: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await e.store.staleEmbeddings(NEW, cursor, 2); // pages of 2: cursor works
        out.push(...page.jobs.filter((j) => j.datasetId === ds).map((j) => j.itemId));
        cursor = page.next;
      } while (cursor);
      return out;
    };
    expect(await stale()).toEqual(['a', 'b', 'c']);
    expect(await e.store.staleEmbeddingCount(ds, NEW)).toBe(3);
    expect(await e.store.staleEmbeddingCount(ds, EMB)).toBe(0);
    // a worker with the new embedder: on Elasticsearch it adds a vector field of the new size
    const next = e.sized(12);
    const [ja, jb, jc] = jobs;
    // twelve dimensions where the old embedder had eight: a vector of another size
    const wide = (k: number) => Array.from({ length: 12 }, (_, i) => (i === k ? 1 : 0));
    expect(await next.store.markEmbedded(ja!, { vector: wide(0), embedder: NEW })).toBe(true);
    expect(await next.store.markEmbedded(jb!, { vector: wide(1), embedder: NEW })).toBe(true);
    // the image is gone: recorded as tried, left out of similarity, not stale any more
    expect(await next.store.markEmbedded(jc!, { vector: [], embedder: NEW })).toBe(true);
    // a job for an old url, or for an item that is not processed, changes nothing
    expect(
      await next.store.markEmbedded(
        { ...ja!, url: url('a', 9) },
        { vector: wide(5), embedder: NEW },
      ),
    ).toBe(false);
    expect(await next.store.markEmbedded(jobs[3]!, { vector: wide(5), embedder: NEW })).toBe(false);

    // Elasticsearch lists from its refreshed view: the new embeddings show at the next refresh
    const deadline = Date.now() + 5000;
    while ((await stale()).length && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(await stale()).toEqual([]);
    expect(await e.store.staleEmbeddingCount(ds, NEW)).toBe(0);
    expect(await next.store.getEmbedding(ds, 'a')).toEqual({ embedder: NEW, vector: wide(0) });
    expect(await next.store.getEmbedding(ds, 'c')).toEqual({ embedder: NEW });
    // the item itself is untouched: still processed, listed and searchable
    expect(await e.store.counts(ds)).toMatchObject({ processed: 3, pending: 1, errors: 0 });
    const near = () =>
      next.engine.similar(ds, {
        vector: wide(1),
        embedder: NEW,
        conditions: [],
        limit: 10,
        excludeIds: [],
      });
    const until = Date.now() + 5000;
    let hits = await near();
    while (hits.length < 2 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      hits = await near();
    }
    expect(hits.map((h) => h.item.id)).toEqual(['b', 'a']);
    expect(
      await e.engine.similar(ds, {
        vector: axis(0),
        embedder: EMB,
        conditions: [],
        limit: 10,
        excludeIds: [],
      }),
    ).toEqual([]);
    expect((await search([])).items.map((i) => i.id)).toEqual(['a', 'b', 'c']);
    // a metadata update keeps the new embedding
    await next.store.applyWrites(
      ds,
      [{ id: 'a', url: url('a'), metadata: { color: 'green' } }],
      'put',
      T0,
    );
    expect(await next.store.getEmbedding(ds, 'a')).toEqual({ embedder: NEW, vector: wide(0) });
  });

  test('deleted items are gone from listing, details, search and counts', async () => {
    await processAll(
      await write([
        { id: 'a', url: url('a') },
        { id: 'b', url: url('b') },
      ]),
    );
    expect(await e.store.deleteItems(ds, ['a', 'nope'])).toBe(1);
    expect((await e.store.list(ds, 0, 10)).map((r) => r.id)).toEqual(['b']);
    expect(await e.store.getItems(ds, ['a'])).toEqual([]);
    expect((await search([])).items.map((i) => i.id)).toEqual(['b']);
    expect(await e.store.counts(ds)).toMatchObject({ items: 1, processed: 1 });
  });

  test('a dataset dropped by another host reads as empty here; a late result changes nothing', async () => {
    const jobs = await write([
      { id: 'a', url: url('a') },
      { id: 'b', url: url('b') },
    ]);
    expect(await e.store.markProcessed(jobs[0], features, T0 + 1)).toBe(true);
    await settled(1);
    // b's worker has read its item (realtime, as each job starts) and is downloading the image
    expect(await e.store.getItems(ds, ['b'], { latest: true })).toHaveLength(1);
    const other = e.sized(DIMS); // another process of the installation
    await other.store.dropDataset(ds);
    expect(await e.store.list(ds, 0, 10)).toEqual([]);
    expect(await e.store.getItems(ds, ['a', 'b'])).toEqual([]);
    expect(await e.store.existingIds(ds, ['a'])).toEqual(new Set());
    expect(await e.store.counts(ds)).toEqual({ items: 0, processed: 0, pending: 0, errors: 0 });
    expect((await search([])).total).toBe(0);
    expect(await e.store.markProcessed(jobs[1], features, T0 + 2)).toBe(false);
    expect(await e.store.getItems(ds, ['b'])).toEqual([]);
    // a new dataset under the same id starts afresh on either host
    expect(await write([{ id: 'c', url: url('c') }])).toHaveLength(1);
    expect((await other.store.list(ds, 0, 10)).map((r) => r.id)).toEqual(['c']);
  });

  test('facets count processed items under the filter', async () => {
    await processAll(
      await write([
        { id: 'a', url: url('a'), metadata: { color: 'red', kind: 'boot' } },
        { id: 'b', url: url('b'), metadata: { color: 'red', kind: 'shoe' } },
        { id: 'c', url: url('c'), metadata: { color: 'blue', kind: 'boot' } },
      ]),
    );
    await write([{ id: 'd', url: url('d'), metadata: { color: 'red', kind: 'boot' } }]);
    const f = await e.engine.facets(
      ds,
      [{ kind: 'match', field: 'kind', values: ['boot'] }],
      ['color'],
    );
    expect(f).toEqual({ color: { red: 1, blue: 1 } });
  });
});

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
