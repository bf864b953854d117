/**
 * The in-memory index stays in step with SQLite through the change log: writes from another
 * connection (another process), deletions, a dropped dataset, a pk reused by another dataset,
 * and an index that slept past the pruned part of the log.
 */
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedContent } from '../../src/adapters/embedded/embedded-ports';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import { SqlSearchEngine } from '../oracle/sql-search-engine';
import type { ContentStore } from '../../src/ports/content-store';
import type { Condition } from '../../src/query/ast';
import { tempDir } from '../helpers/app';

const T0 = Date.UTC(2026, 0, 1);
const sort = { field: 'n', order: 'asc' as const };

async function put(store: ContentStore, ds: string, id: string, n: number, processed = true) {
  const url = `https://img.example.com/${id}.jpg`;
  await store.applyWrites(
    ds,
    [{ id, url, metadata: { n, tag: n % 2 ? 'odd' : 'even' } }],
    'post',
    T0 + n,
  );
  if (processed)
    await store.markProcessed(
      { datasetId: ds, itemId: id, url, attempt: 1 },
      { width: 10, height: 10, format: 'png', vector: [1, 0], embedder: 'e' },
      T0 + n,
    );
}

async function ids(engine: EmbeddedSearchEngine, ds: string, conditions: Condition[] = []) {
  const r = await engine.search(ds, { conditions, sort, offset: 0, limit: 1000 });
  return { ids: r.items.map((i) => i.id), total: r.total };
}

describe('embedded index keeps in step with the store', () => {
  const dbs: Db[] = [];
  afterAll(() => dbs.forEach((d) => d.close()));

  it('sees writes, processing and deletes made through another connection', async () => {
    const file = path.join(tempDir('vss-index-'), 'store.db');
    const writer = openDb(file);
    const reader = openDb(file);
    dbs.push(writer, reader);
    const store = embeddedContent(writer);
    const engine = new EmbeddedSearchEngine(reader);
    await put(store, 'd', 'a', 1);
    await put(store, 'd', 'b', 2, false);
    expect(await ids(engine, 'd')).toEqual({ ids: ['a'], total: 1 });
    await put(store, 'd', 'c', 3);
    await store.markProcessed(
      { datasetId: 'd', itemId: 'b', url: 'https://img.example.com/b.jpg', attempt: 1 },
      { width: 10, height: 10, format: 'png', vector: [0, 1], embedder: 'e' },
      T0,
    );
    expect(await ids(engine, 'd')).toEqual({ ids: ['a', 'b', 'c'], total: 3 });
    await store.applyWrites('d', [{ id: 'a', metadata: { n: 9 } }], 'put', T0 + 9);
    expect(await ids(engine, 'd', [{ kind: 'match', field: 'tag', values: ['odd'] }])).toEqual({
      ids: ['c', 'a'],
      total: 2,
    });
    await store.deleteItems('d', ['c']);
    expect(await ids(engine, 'd')).toEqual({ ids: ['b', 'a'], total: 2 });
    await store.dropDataset('d');
    expect(await ids(engine, 'd')).toEqual({ ids: [], total: 0 });
  });

  it('a pk freed by one dataset and reused by another stays out of the first', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const store = embeddedContent(db);
    const engine = new EmbeddedSearchEngine(db);
    await put(store, 'x', 'one', 1);
    await put(store, 'x', 'two', 2);
    expect((await ids(engine, 'x')).total).toBe(2);
    await store.deleteItems('x', ['two']);
    await put(store, 'y', 'three', 3);
    expect(await ids(engine, 'x')).toEqual({ ids: ['one'], total: 1 });
    expect(await ids(engine, 'y')).toEqual({ ids: ['three'], total: 1 });
  });

  it('rebuilds when the log it would need was pruned', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const store = embeddedContent(db);
    const engine = new EmbeddedSearchEngine(db);
    await put(store, 'p', 'keep', 0);
    expect((await ids(engine, 'p')).total).toBe(1);
    // Enough delete transactions that old tombstones are pruned past what the index saw.
    for (let i = 1; i <= 1300; i++) {
      await put(store, 'p', `t${i}`, i, false);
      await store.deleteItems('p', [`t${i}`]);
    }
    await put(store, 'p', 'late', 5000);
    const floor = (
      db.prepare('SELECT floor FROM change_heads WHERE dataset_id = ?').get('p') as {
        floor: number;
      }
    ).floor;
    expect(floor).toBeGreaterThan(0);
    expect(await ids(engine, 'p')).toEqual({ ids: ['keep', 'late'], total: 2 });
  });

  it('builds a large dataset in the background, answering once it is built, and misses no write made during the build', async () => {
    const file = path.join(tempDir('vss-index-'), 'store.db');
    const db = openDb(file);
    dbs.push(db);
    const store = embeddedContent(db);
    const engine = new EmbeddedSearchEngine(db);
    const N = 5000;
    const content = Array.from({ length: N }, (_, i) => ({
      id: `i${String(i).padStart(5, '0')}`,
      url: `https://img.example.com/${i}.jpg`,
      metadata: { n: i, tag: i % 2 ? 'odd' : 'even' },
    }));
    await store.applyWrites('big', content, 'post', T0);
    for (const c of content)
      await store.markProcessed(
        { datasetId: 'big', itemId: c.id, url: c.url, attempt: 1 },
        { width: 10, height: 10, format: 'png', vector: [1, 0], embedder: 'e' },
        T0,
      );
    const odd: Condition[] = [{ kind: 'match', field: 'tag', values: ['odd'] }];
    // The first read starts the build and waits for it.
    const first = ids(engine, 'big', odd);
    const building = engine.indexSettled('big');
    expect(engine.lastBuild).toBeUndefined();
    // Written while the build runs: a new item, a changed one and a deleted one.
    await put(store, 'big', 'late', 7, true);
    await store.applyWrites(
      'big',
      [{ id: 'i00001', url: content[1]!.url, metadata: { n: 1, tag: 'even' } }],
      'post',
      T0 + 1,
    );
    await store.deleteItems('big', ['i00003']);
    await building;
    expect(engine.lastBuild?.items).toBe(N);
    // the read that waited for the build sees the writes made during it, as later ones do
    expect(await first).toEqual(await ids(engine, 'big', odd));
    const after = await ids(engine, 'big', odd);
    expect(after.total).toBe(N / 2 - 2 + 1);
    // n ties break by id: i00007 before late (both 7)
    expect(after.ids.slice(0, 4)).toEqual(['i00005', 'i00007', 'late', 'i00009']);
    const reference = await new SqlSearchEngine(db).search('big', {
      conditions: odd,
      sort,
      offset: 0,
      limit: 1000,
    });
    expect(after.ids).toEqual(reference.items.map((i) => i.id));
    expect(after.ids).not.toContain('i00001');
    expect(after.ids).not.toContain('i00003');
  });
  it('keeps every holder of a value whose 65th arrives by an older item changing', async () => {
    // The 65th holder turns a value's list into a bitset; an older item has a lower slot than
    // the others, and the bitset must still cover the highest.
    const db = openDb(path.join(tempDir('vss-index-'), 'store.db'));
    dbs.push(db);
    const store = embeddedContent(db);
    const engine = new EmbeddedSearchEngine(db);
    const tagOf = (n: number) => (n >= 100 && n < 164 ? 'red' : 'plain');
    for (let n = 0; n < 200; n++) {
      const id = `i${String(n).padStart(5, '0')}`;
      const url = `https://img.example.com/${id}.jpg`;
      await store.applyWrites('d', [{ id, url, metadata: { n, tag: tagOf(n) } }], 'post', T0 + n);
      await store.markProcessed(
        { datasetId: 'd', itemId: id, url, attempt: 1 },
        { width: 10, height: 10, format: 'png', vector: [1, 0], embedder: 'e' },
        T0 + n,
      );
    }
    const red: Condition[] = [{ kind: 'match', field: 'tag', values: ['red'] }];
    expect((await ids(engine, 'd', red)).total).toBe(64);
    await store.applyWrites('d', [{ id: 'i00005', metadata: { n: 5, tag: 'red' } }], 'put', T0);
    const after = await ids(engine, 'd', red);
    expect(after.total).toBe(65);
    expect(after.ids).toEqual(
      (
        await new SqlSearchEngine(db).search('d', { conditions: red, sort, offset: 0, limit: 1000 })
      ).items.map((i) => i.id),
    );
  });
});
