/**
 * A scoped token's reads by id (content/details, similar by id) show an item only as the
 * search that decided the scope saw it. On Elasticsearch the item is read realtime while that
 * search sees the last refresh: an item just moved out of the scope must not be shown with its
 * new metadata. Here the engine's search is held at the state before the move, as an index not
 * yet refreshed would be.
 */
import path from 'node:path';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedContent } from '../../src/adapters/embedded/embedded-ports';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import type { SearchEngine } from '../../src/ports/search-engine';
import type { Principal } from '../../src/services/principal';
import { openScope, type ScopeDeps } from '../../src/services/vision-scope';
import { datasetRecord } from '../contract/engines';
import { tempDir } from '../helpers/app';

const T0 = Date.UTC(2026, 0, 1);
const URL = 'https://img.example.com/m.jpg';

test('an item moved out of the scope after the scope search saw it is not shown', async () => {
  const db = openDb(path.join(tempDir('vss-scope-'), 'store.db'));
  try {
    const store = embeddedContent(db);
    const engine = new EmbeddedSearchEngine(db);
    const ds = datasetRecord('d', 'shoes');
    await store.applyWrites('d', [{ id: 'm', url: URL, metadata: { brand: 'acme' } }], 'post', T0);
    await store.markProcessed(
      { datasetId: 'd', itemId: 'm', url: URL, attempt: 1 },
      { width: 10, height: 10, format: 'png', vector: [1, 0], embedder: 'e' },
      T0,
    );
    const before = await engine.search('d', {
      conditions: [],
      sort: { field: 'service_updated_at', order: 'desc' },
      offset: 0,
      limit: 10,
    });
    const stale = Object.assign(Object.create(engine) as SearchEngine, {
      search: () => Promise.resolve(before),
    });
    const p: Principal = {
      kind: 'scoped',
      token: { claims: { q: 'brand:acme' } },
    } as unknown as Principal;
    const deps = {
      engine: stale,
      store,
      settingsAt: () => '/orgs/acme/datasets/shoes/settings',
      now: () => T0,
    } as unknown as ScopeDeps;
    const read = async () => {
      const scope = openScope(p, ds, 'details', deps);
      return [...(await scope.items(['m'])).values()].map((i) => i.metadata);
    };
    expect(await read()).toEqual([{ brand: 'acme' }]);
    await store.applyWrites('d', [{ id: 'm', metadata: { brand: 'other' } }], 'put', T0 + 1);
    expect(await read()).toEqual([]);
  } finally {
    db.close();
  }
});
