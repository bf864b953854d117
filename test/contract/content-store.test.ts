/**
 * One set of cases for every ContentStore + SearchEngine adapter: the embedded SQLite engine in
 * the default project, Elasticsearch on the real local server in the production project
 * (test/contract/tier.ts). Cases only Elasticsearch has: test/adapters/elasticsearch.
 */
import path from 'node:path';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { ContentWrite } from '../../src/domain/content';
import type { ProcessingJob } from '../../src/domain/item';
import type { Condition } from '../../src/query/ast';
import type { ContentStore } from '../../src/ports/content-store';
import type { SearchEngine } from '../../src/ports/search-engine';
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

  test('the pixel hash is kept with the image, replaced on a re-embedding, gone with the url', async () => {
    // newest writes, not as queries see them after a refresh
    const latest = (id: string) => e.store.getItems(ds, [id], { latest: true });
    const [job] = await write([{ id: 'a', url: url('a') }]);
    expect(await e.store.markProcessed(job!, { ...features, pixelHash: 'h-one' }, T0)).toBe(true);
    expect((await latest('a'))[0]!.image).toMatchObject({ pixelHash: 'h-one' });
    // a metadata write keeps it
    await write([{ id: 'a', url: url('a'), metadata: { n: 2 } }]);
    expect((await latest('a'))[0]!.image?.pixelHash).toBe('h-one');
    const again = { vector: axis(1), embedder: EMB, pixelHash: 'h-two' };
    expect(await e.store.markEmbedded(job!, again)).toBe(true);
    expect((await latest('a'))[0]!.image?.pixelHash).toBe('h-two');
    // a new url is a new picture, not yet hashed
    const [fresh] = await write([{ id: 'a', url: url('a', 2) }], 'put');
    expect((await latest('a'))[0]!.image).toBeUndefined();
    expect(await e.store.markProcessed(fresh!, features, T0 + 5)).toBe(true);
    expect((await latest('a'))[0]!.image).toEqual({
      width: 40,
      height: 30,
      url: url('a', 2),
      processedAt: T0 + 5,
    });
  });

  test('sameImageGroups: processed items sharing a pixel hash, until deleted or changed', async () => {
    const hashes: Record<string, string | undefined> = {
      a: 'h1',
      b: 'h2',
      c: 'h1',
      d: 'h3',
      e: 'h3',
      f: undefined,
      g: 'h3',
    };
    const jobs = await write(Object.keys(hashes).map((id) => ({ id, url: url(id) })));
    for (const j of jobs) {
      const h = hashes[j.itemId];
      // g stays pending: not a duplicate of anything yet
      if (j.itemId !== 'g')
        expect(
          await e.store.markProcessed(j, { ...features, ...(h ? { pixelHash: h } : {}) }, T0),
        ).toBe(true);
    }
    await settled(1);
    const sorted = (gs: string[][]) => gs.map((g) => g.join(',')).sort();
    expect(sorted(await e.store.sameImageGroups(ds))).toEqual(['a,c', 'd,e']);
    await e.store.deleteItems(ds, ['c']);
    await write([{ id: 'd', url: url('d', 2) }], 'put');
    await settled(2);
    expect(await e.store.sameImageGroups(ds)).toEqual([]);
    expect(await e.store.sameImageGroups('no-such-dataset')).toEqual([]);
  });

  test('processing succeeds once: a redelivered job reports no change', async () => {
    const jobs = await write([{ id: 'a', url: url('a') }]);
    expect(await e.store.markProcessed(jobs[0]!, features, T0)).toBe(true);
    expect(await e.store.markProcessed(jobs[0]!, features, T0)).toBe(false);
    await settled();
    expect(await e.store.counts(ds)).toMatchObject({ processed: 1, pending: 0 });
  });

  test('fresh counts include every item processed before the call', async () => {
    const jobs = await write([
      { id: 'a', url: url('a') },
      { id: 'b', url: url('b') },
    ]);
    for (const j of jobs) expect(await e.store.markProcessed(j, features, T0)).toBe(true);
    expect(await e.store.counts(ds, { fresh: true })).toEqual({
      items: 2,
      processed: 2,
      pending: 0,
      errors: 0,
    });
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
