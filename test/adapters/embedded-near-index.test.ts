/**
 * The embedded engine's neighbour search for the duplicate pass above NEAR_INDEX_ROWS vectors:
 * after the first exact calls it builds and uses the inverted file (NearIndex), and finds the
 * same near copies the exact scan finds.
 */
import path from 'node:path';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { NearIndex } from '../../src/adapters/embedded/near-index';
import { seededRandom } from '../../src/lib/seeded-random';
import { tempDir } from '../helpers/app';

const DIMS = 16;
const N = 5_200;
const T0 = Date.UTC(2026, 10, 27, 12, 0);

test('above 5,000 vectors the pass searches an inverted file and finds the copies the exact scan finds', async () => {
  const dir = tempDir('vss-near-');
  const db = openDb(path.join(dir, 'store.db'));
  const ports = embeddedPorts(db, dir);
  try {
    const r = seededRandom(11);
    const unit = (v: number[]) => {
      const s = Math.hypot(...v);
      return v.map((x) => x / s);
    };
    const themes = Array.from({ length: 40 }, () =>
      unit(Array.from({ length: DIMS }, () => r() - 0.5)),
    );
    const vectors: number[][] = [];
    for (let i = 0; i < N; i++) {
      // every 100th item is a near copy of the one before it
      const base = i % 100 === 1 ? vectors[i - 1]! : themes[Math.floor(r() * themes.length)]!;
      const spread = i % 100 === 1 ? 0.04 : 0.6;
      vectors.push(unit(base.map((x) => x + (r() - 0.5) * spread)));
    }
    const ids = vectors.map((_, i) => `i${String(i).padStart(5, '0')}`);
    const jobs = await ports.content.applyWrites(
      'ds',
      ids.map((id) => ({ id, url: `https://img.test/${id}.png` })),
      'post',
      T0,
    );
    for (const j of jobs) {
      const i = Number(j.itemId.slice(1));
      await ports.content.markProcessed(
        j,
        { width: 8, height: 8, format: 'png', vector: vectors[i]!, embedder: 'e' },
        T0,
      );
    }
    const copies = ids.filter((_, i) => i % 100 === 0);
    const search = () => ports.engine.neighbours('ds', 'e', copies, 0.05, 8);
    const build = jest.spyOn(NearIndex, 'build');
    const exact = await search();
    await search();
    expect(build).not.toHaveBeenCalled();
    const indexed = await search();
    expect(build).toHaveBeenCalledTimes(1);
    const copyOf = (found: typeof exact) =>
      Object.fromEntries(
        found.map((f) => [f.id, f.neighbours.filter((n) => n.distance < 0.01).map((n) => n.id)]),
      );
    // each planted copy is found, by both searches
    expect(Object.values(copyOf(exact)).every((near) => near.length >= 1)).toBe(true);
    expect(copyOf(indexed)).toEqual(copyOf(exact));
    expect(exact).toHaveLength(copies.length);
  } finally {
    db.close();
  }
}, 60_000);
