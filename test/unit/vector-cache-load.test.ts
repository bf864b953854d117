/**
 * The embedded engine's vector matrix of a large dataset is loaded on a thread: the process
 * keeps answering during the load, the matrix equals one loaded at once (tuned projections
 * included), requests share it, a vector written during a load is in the matrix of every
 * request made after that write, and a thread's SQLite failure reaches the caller with its code.
 */
import fs from 'node:fs';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { itemStatements } from '../../src/adapters/embedded/item-row';
import { VectorCache, type Matrix, type Tuning } from '../../src/adapters/embedded/vector-cache';
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

  it('loads on a thread, the event loop turning meanwhile, into the matrix a load at once gives', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000 });
    const loop = turns();
    const m = await cache.ready('d', 'e');
    loop.stop();
    expect(loop.count).toBeGreaterThanOrEqual(5);
    const once = new VectorCache(db).get('d', 'e');
    expect(Array.from(m.pks)).toEqual(Array.from(once.pks));
    expect(Array.from(m.scale)).toEqual(Array.from(once.scale));
    expect(m.rowOf).toEqual(once.rowOf);
    for (const pk of [1, 500, 1000, 1001, 2999, 3000])
      expect(codesOf(m, pk)).toEqual(codesOf(once, pk));
    expect(await cache.ready('d', 'e')).toBe(m);
  });

  it('projects and quantises a tuned matrix on the thread as a load at once does', async () => {
    const r = seededRandom(3);
    const k = 3;
    const tuning: Tuning = {
      model: 'm1',
      projection: {
        dims: DIMS,
        k,
        mean: Float32Array.from({ length: DIMS }, () => r() - 0.5),
        basis: Float32Array.from({ length: DIMS * k }, () => r() - 0.5),
      },
    };
    const m = await new VectorCache(db, { loadNowRows: 1000 }).ready('d', 'e', tuning);
    const once = new VectorCache(db).get('d', 'e', tuning);
    expect(m.tuned?.model).toBe('m1');
    expect(Array.from(m.tuned!.scale)).toEqual(Array.from(once.tuned!.scale));
    const rows = m.tuned!.codes;
    expect(Array.from(rows.codes.subarray(0, ROWS * rows.padded))).toEqual(
      Array.from(once.tuned!.codes.codes.subarray(0, ROWS * rows.padded)),
    );
    expect(new Set(m.tuned!.scale).size).toBeGreaterThan(ROWS / 2);
  });

  it("rejects with SQLite's code when the thread cannot read the file", async () => {
    fs.rmSync(db.name);
    await expect(new VectorCache(db, { loadNowRows: 1000 }).ready('d', 'e')).rejects.toMatchObject({
      code: 'SQLITE_CANTOPEN',
    });
  });

  it('loads at once up to loadNowRows', async () => {
    const cache = new VectorCache(db, { loadNowRows: ROWS });
    const loop = turns();
    await cache.ready('d', 'e');
    loop.stop();
    expect(loop.count).toBe(0);
  });

  it('is shared by requests arriving during a load', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000 });
    const first = cache.ready('d', 'e');
    await new Promise((r) => setImmediate(r));
    expect(await cache.ready('d', 'e')).toBe(await first);
  });

  it('has a vector written during a load in the matrix of a request made after the write', async () => {
    const cache = new VectorCache(db, { loadNowRows: 1000 });
    const early = cache.ready('d', 'e');
    const changed = Array.from({ length: DIMS }, (_, j) => (j === 0 ? -1 : 0));
    write(db, 1, changed);
    const late = cache.ready('d', 'e');
    const [a, b] = await Promise.all([early, late]);
    expect(b.version).toBeGreaterThan(a.version);
    expect(codesOf(b, 1)).toEqual([-127, ...Array<number>(DIMS - 1).fill(0)]);
    expect(await cache.ready('d', 'e')).toBe(b);
  });
});
