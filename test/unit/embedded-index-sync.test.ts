/**
 * The in-memory index stays in step with SQLite through the change log: writes from another
 * connection (another process), deletions, a dropped dataset, a pk reused by another dataset,
 * and an index that slept past the pruned part of the log.
 */
import path from 'node:path';
import { EmbeddedContentStore } from '../../src/adapters/embedded/content-store';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import type { Condition } from '../../src/query/ast';
import { tempDir } from '../helpers/app';

const T0 = Date.UTC(2026, 0, 1);
const sort = { field: 'n', order: 'asc' as const };

async function put(
  store: EmbeddedContentStore,
  ds: string,
  id: string,
  n: number,
  processed = true,
) {
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
    const store = new EmbeddedContentStore(writer);
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
    const store = new EmbeddedContentStore(db);
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
    const store = new EmbeddedContentStore(db);
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
});
