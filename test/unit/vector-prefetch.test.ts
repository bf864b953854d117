/**
 * A large dataset's first query builds its index in the background; the engine loads the
 * vector matrix on a thread meanwhile, so the first `similar` finds it loaded or loading and
 * starts no load of its own; a failure of that head start never fails the query. A dataset
 * ranking by a tuned projection (contract §20) is not prefetched: its requests load the
 * projected rows with the vectors.
 */
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedContent } from '../../src/adapters/embedded/embedded-ports';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import * as vectorLoad from '../../src/adapters/embedded/vector-load';
import { tempDir } from '../helpers/app';

const T0 = Date.UTC(2026, 0, 1);
/** Past the 5,000 vectors loaded at once and the 2,000 items indexed at once. */
const N = 5200;

async function seed(similarity: string | null): Promise<Db> {
  const db = openDb(path.join(tempDir('vss-prefetch-'), 'store.db'));
  db.prepare(
    `INSERT INTO datasets (id, org, name, fields, settings_version, created_at, embedder, embedder_dims, similarity)
     VALUES ('big', 'o', 'big', '[]', 1, '2026-01-01T00:00:00Z', 'e', 2, ?)`,
  ).run(similarity);
  const store = embeddedContent(db);
  const content = Array.from({ length: N }, (_, i) => ({
    id: `i${String(i).padStart(5, '0')}`,
    url: `https://img.example.com/${i}.jpg`,
    metadata: { n: i },
  }));
  await store.applyWrites('big', content, 'post', T0);
  for (const [i, c] of content.entries())
    await store.markProcessed(
      { datasetId: 'big', itemId: c.id, url: c.url, attempt: 1 },
      { width: 10, height: 10, format: 'png', vector: [Math.cos(i), Math.sin(i)], embedder: 'e' },
      T0,
    );
  return db;
}

const search = (engine: EmbeddedSearchEngine) =>
  engine.search('big', { conditions: [], sort: { field: 'n', order: 'asc' }, offset: 0, limit: 3 });

const similar = (engine: EmbeddedSearchEngine) =>
  engine.similar('big', {
    vector: [1, 0],
    embedder: 'e',
    conditions: [],
    limit: 2,
    excludeIds: [],
  });

describe('vectors of a large dataset loaded while its index builds', () => {
  const dbs: Db[] = [];
  afterEach(() => {
    jest.restoreAllMocks();
    for (const db of dbs.splice(0)) db.close();
  });

  it('starts the load with the first query, and the first similar shares it', async () => {
    const db = await seed(null);
    dbs.push(db);
    const loads = jest.spyOn(vectorLoad, 'loadInThread');
    const engine = new EmbeddedSearchEngine(db);
    const first = search(engine);
    expect(loads).toHaveBeenCalledTimes(1);
    expect((await first).total).toBe(N);
    const hits = await similar(engine);
    // item i's vector is at angle i: the nearest to [1, 0] have the largest cosines
    const nearest = Array.from({ length: N }, (_, i) => i)
      .sort((a, b) => Math.cos(b) - Math.cos(a))
      .slice(0, 2)
      .map((i) => `i${String(i).padStart(5, '0')}`);
    expect(hits.map((h) => h.item.id)).toEqual(nearest);
    expect(loads).toHaveBeenCalledTimes(1);
  });

  it('never fails the query that starts the build', async () => {
    // a setting that cannot be read makes the head start fail; the search answers regardless
    const db = await seed('{');
    dbs.push(db);
    const loads = jest.spyOn(vectorLoad, 'loadInThread');
    const engine = new EmbeddedSearchEngine(db);
    expect((await search(engine)).total).toBe(N);
    expect(loads).not.toHaveBeenCalled();
  });

  it('leaves a dataset ranking by a tuned projection to its requests', async () => {
    const db = await seed(JSON.stringify({ learnFrom: 'n', weight: 0.75, state: 'active' }));
    dbs.push(db);
    const loads = jest.spyOn(vectorLoad, 'loadInThread');
    const engine = new EmbeddedSearchEngine(db);
    expect((await search(engine)).total).toBe(N);
    expect(loads).not.toHaveBeenCalled();
  });
});
