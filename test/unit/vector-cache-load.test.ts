/**
 * The embedded engine's vector matrix of a large dataset is loaded in slices: the process keeps
 * answering during the load, requests share it, and a vector written during a load is in the
 * matrix of every request made after that write.
 */
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { itemStatements } from '../../src/adapters/embedded/item-row';
import { VectorCache, type Matrix } from '../../src/adapters/embedded/vector-cache';
import { vectorBlob } from '../../src/adapters/embedded/vectors';
import { seededRandom } from '../../src/lib/seeded-random';
import { tempDir } from '../helpers/app';

const DIMS = 16;
const ROWS = 3000;

function seed(db: Db): void {
  const st = itemStatements(db);
  const r = seededRandom(7);
  db.transaction(() => {
    for (let pk = 1; pk <= ROWS; pk++)
      st.putVector.run(pk, 'd', 'e', vectorBlob(Array.from({ length: DIMS }, () => r() - 0.5)));
    st.bumpVectors.run('d');
  })();
}

function write(db: Db, pk: number, v: number[]): void {
  const st = itemStatements(db);
  db.transaction(() => {
    st.putVector.run(pk, 'd', 'e', vectorBlob(v));
    st.bumpVectors.run('d');
  })();
}

const codesOf = (m: Matrix, pk: number): number[] => {
  const row = m.rowOf.get(pk)!;
  return Array.from(m.codes.codes.subarray(row * m.codes.padded, row * m.codes.padded + m.dims));
};

/** Counts turns of the event loop until stopped. */
function turns(): { count: number; stop(): void } {
  const t = { count: 0, stopped: false, stop: () => (t.stopped = true) };
  const tick = () => {
    if (t.stopped) return;
    t.count++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return t;
}

describe('vector matrix of a large dataset', () => {
  let db: Db;
  beforeEach(() => {
    db = openDb(path.join(tempDir('vss-vectors-'), 'store.db'));
    seed(db);
  });
  afterEach(() => db.close());

  it('loads in slices, the event loop turning meanwhile, into the matrix a load at once gives', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000, sliceMs: 0 });
    const loop = turns();
    const m = await cache.ready('d', 'e');
    loop.stop();
    // 3,000 rows at 500 per statement: a turn between each
    expect(loop.count).toBeGreaterThanOrEqual(5);
    const once = new VectorCache(db).get('d', 'e');
    expect(Array.from(m.pks)).toEqual(Array.from(once.pks));
    expect(Array.from(m.scale)).toEqual(Array.from(once.scale));
    for (const pk of [1, 500, 501, 2999, 3000]) expect(codesOf(m, pk)).toEqual(codesOf(once, pk));
    expect(await cache.ready('d', 'e')).toBe(m);
  });

  it('loads at once up to loadNowRows', async () => {
    const cache = new VectorCache(db, { loadNowRows: ROWS, sliceMs: 0 });
    const loop = turns();
    await cache.ready('d', 'e');
    loop.stop();
    expect(loop.count).toBe(0);
  });

  it('is shared by requests arriving during a load', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000, sliceMs: 0 });
    const first = cache.ready('d', 'e');
    await new Promise((r) => setImmediate(r));
    expect(await cache.ready('d', 'e')).toBe(await first);
  });

  it('has a vector written during a load in the matrix of a request made after the write', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000, sliceMs: 0 });
    const before = codesOf(new VectorCache(db).get('d', 'e'), 1);
    const early = cache.ready('d', 'e');
    // the first slice (pks 1–500) has been read when the loop turns
    await new Promise((r) => setImmediate(r));
    const changed = Array.from({ length: DIMS }, (_, j) => (j === 0 ? -1 : 0));
    write(db, 1, changed);
    const late = cache.ready('d', 'e');
    const [a, b] = await Promise.all([early, late]);
    expect(codesOf(a, 1)).toEqual(before);
    expect(codesOf(b, 1)).toEqual([-127, ...Array<number>(DIMS - 1).fill(0)]);
    expect(b.version).toBeGreaterThan(a.version);
    expect(await cache.ready('d', 'e')).toBe(b);
  });
});
