/**
 * The embedded engine's neighbour search for the duplicate pass above NEAR_INDEX_ROWS vectors:
 * after the first exact calls it builds and uses the inverted file (NearIndex), finds the same
 * near copies the exact scan finds, and never keeps a pair scored on vectors that changed
 * while it searched.
 */
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { NearIndex } from '../../src/adapters/embedded/near-index';
import type { EnginePorts } from '../../src/adapters/engine-ports';
import type { FoundNeighbours } from '../../src/ports/search-engine';
import { seededRandom } from '../../src/lib/seeded-random';
import { tempDir } from '../helpers/app';

const DIMS = 16;
const N = 5_200;
const T0 = Date.UTC(2026, 10, 27, 12, 0);

const unit = (v: number[]) => {
  const s = Math.hypot(...v);
  return v.map((x) => x / s);
};
const idOf = (i: number) => `i${String(i).padStart(5, '0')}`;

let db: Db;
let ports: EnginePorts;

/** Every 100th item has a near copy right after it; the rest are spread around 40 themes. */
beforeAll(async () => {
  const dir = tempDir('vss-near-');
  db = openDb(path.join(dir, 'store.db'));
  ports = embeddedPorts(db, dir);
  const r = seededRandom(11);
  const themes = Array.from({ length: 40 }, () =>
    unit(Array.from({ length: DIMS }, () => r() - 0.5)),
  );
  const vectors: number[][] = [];
  for (let i = 0; i < N; i++) {
    const base = i % 100 === 1 ? vectors[i - 1]! : themes[Math.floor(r() * themes.length)]!;
    const spread = i % 100 === 1 ? 0.04 : 0.6;
    vectors.push(unit(base.map((x) => x + (r() - 0.5) * spread)));
  }
  const jobs = await ports.content.applyWrites(
    'ds',
    vectors.map((_, i) => ({ id: idOf(i), url: `https://img.test/${idOf(i)}.png` })),
    'post',
    T0,
  );
  for (const j of jobs)
    await ports.content.markProcessed(
      j,
      {
        width: 8,
        height: 8,
        format: 'png',
        vector: vectors[Number(j.itemId.slice(1))]!,
        embedder: 'e',
      },
      T0,
    );
}, 60_000);
afterAll(() => db.close());
afterEach(() => jest.restoreAllMocks());

const originals = Array.from({ length: N / 100 }, (_, k) => idOf(k * 100));
const search = () => ports.engine.neighbours('ds', 'e', originals, 0.05, 8);
/** Each searched item's copies (distance < 0.01), by id. */
const copiesOf = (found: FoundNeighbours[]) =>
  Object.fromEntries(
    found.map((f) => [f.id, f.neighbours.filter((n) => n.distance < 0.01).map((n) => n.id)]),
  );

test('above 5,000 vectors the pass searches an inverted file and finds the copies the exact scan finds', async () => {
  const build = jest.spyOn(NearIndex, 'build');
  const exact = await search();
  await search();
  expect(build).not.toHaveBeenCalled();
  const indexed = await search();
  expect(build).toHaveBeenCalledTimes(1);
  expect(exact).toHaveLength(originals.length);
  expect(Object.values(copiesOf(exact)).every((near) => near.length === 1)).toBe(true);
  expect(copiesOf(indexed)).toEqual(copiesOf(exact));
});

/** The item re-processed with another image, whose vector is `vector`. */
async function reprocess(id: string, vector: number[], at: number): Promise<void> {
  const [job] = await ports.content.applyWrites(
    'ds',
    [{ id, url: `https://img.test/${id}-${at}.png` }],
    'post',
    at,
  );
  await ports.content.markProcessed(
    job!,
    { width: 8, height: 8, format: 'png', vector: unit(vector), embedder: 'e' },
    at,
  );
}

test('an item re-processed during the search is not kept at its old distance', async () => {
  // a fresh matrix version: exact, exact, then the build, during which i00101 gets a far image
  await reprocess('i00201', [1, ...Array(DIMS - 1).fill(0)], T0 + 1);
  await search();
  await search();
  const real = NearIndex.build.bind(NearIndex);
  jest.spyOn(NearIndex, 'build').mockImplementation(async (m, rows, pause) => {
    await reprocess('i00101', [0, 1, ...Array(DIMS - 2).fill(0)], T0 + 2);
    return real(m, rows, pause);
  });
  const found = copiesOf(await search());
  expect(found.i00100).toEqual([]);
  expect(found.i00200).toEqual([]);
  expect(found.i00300).toEqual(['i00301']);
  // every other copy still found, from the vectors stored now
  expect(Object.values(found).filter((near) => near.length === 1)).toHaveLength(
    originals.length - 2,
  );
});

test('an index no pass has used for two minutes is let go, and the next pass starts exact', async () => {
  // only setTimeout is faked: the build's slices and the store keep their real clocks
  jest.useFakeTimers({
    doNotFake: ['nextTick', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'],
    now: Date.now(),
  });
  try {
    const build = jest.spyOn(NearIndex, 'build');
    const near = jest.spyOn(NearIndex.prototype, 'near');
    await search();
    await search();
    await search();
    expect(build).toHaveBeenCalledTimes(1);
    // each use keeps it another two minutes
    for (const wait of [100_000, 100_000]) {
      jest.advanceTimersByTime(wait);
      near.mockClear();
      await search();
      expect(near).toHaveBeenCalled();
    }
    jest.advanceTimersByTime(120_001);
    near.mockClear();
    await search();
    await search();
    expect(near).not.toHaveBeenCalled();
    expect(build).toHaveBeenCalledTimes(1);
    await search();
    expect(build).toHaveBeenCalledTimes(2);
  } finally {
    jest.useRealTimers();
  }
});
