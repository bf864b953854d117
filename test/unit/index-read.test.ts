/**
 * A large dataset's index is built from chunks a thread reads as JSON (index-read.ts): the
 * chunks hold exactly the rows a read on the main connection gives (floats to the last bit,
 * any string), an index built from them answers as the SQL oracle does with another
 * dataset's items interleaved, and a thread's SQLite failure reaches the caller with its code.
 */
import fs from 'node:fs';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedContent } from '../../src/adapters/embedded/embedded-ports';
import { QUERYABLE, readInThread, type IndexChunk } from '../../src/adapters/embedded/index-read';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import type { Condition } from '../../src/query/ast';
import { SqlSearchEngine } from '../oracle/sql-search-engine';
import { tempDir } from '../helpers/app';

const T0 = Date.UTC(2026, 0, 1);
/** Past the 2,000 items a dataset is indexed at once, and more than one chunk. */
const N = 4500;

/** A value needing all 17 digits to print back exactly, and awkward strings. */
const metadataOf = (i: number) => ({
  price: i * 0.1 + 0.2,
  ratio: 1 / (i + 3),
  tiny: i % 2 ? -1e-300 * i : 5e-324,
  name: `it "${i}" \\ ✓\n\u0001${'é'.repeat(i % 3)}`,
  tags: [`t${i % 7}`, `u${i % 5}`],
  ...(i % 4 ? { flag: i % 8 === 1 } : {}),
  title: `red shoe ${i % 11} größe`,
});

async function seed(db: Db): Promise<void> {
  const store = embeddedContent(db);
  // the two datasets' items interleave in pk order, a block at a time
  for (let from = 0; from < N; from += 250)
    for (const ds of ['a', 'b'])
      await store.applyWrites(
        ds,
        Array.from({ length: 250 }, (_, k) => ({
          id: `${ds}${from + k}`,
          url: `https://img.example.com/${ds}/${from + k}.jpg`,
          metadata: metadataOf(from + k),
        })),
        'post',
        T0 + from,
      );
  // searches list processed items only
  for (let i = 0; i < N; i++)
    for (const ds of ['a', 'b'])
      await store.markProcessed(
        {
          datasetId: ds,
          itemId: `${ds}${i}`,
          url: `https://img.example.com/${ds}/${i}.jpg`,
          attempt: 1,
        },
        { width: 10, height: 10, format: 'png', vector: [1, 0], embedder: 'e' },
        T0,
      );
}

describe('index chunks read on a thread', () => {
  let db: Db;
  beforeAll(async () => {
    db = openDb(path.join(tempDir('vss-index-read-'), 'store.db'));
    await seed(db);
  });
  afterAll(() => db.close());

  it('hold exactly the rows a read on the main connection gives', async () => {
    const chunks: IndexChunk[] = [];
    for await (const c of readInThread({ file: db.name, datasetId: 'a', chunk: 1000 }))
      chunks.push(c);
    expect(chunks.map((c) => c.items.length)).toEqual([1000, 1000, 1000, 1000, 500]);
    const items = db
      .prepare(
        `SELECT pk, id, state, created_at, updated_at FROM items WHERE dataset_id = 'a' ORDER BY pk`,
      )
      .raw()
      .all();
    expect(chunks.flatMap((c) => c.items)).toEqual(items);
    for (const c of chunks) {
      const lo = c.items[0]![0];
      const hi = c.items[c.items.length - 1]![0];
      const values = db
        .prepare(
          `SELECT item_pk, field, is_array, vtype, sval, nval FROM item_values
           WHERE item_pk BETWEEN ? AND ? AND ${QUERYABLE} ORDER BY item_pk, field, vtype, is_array, scope, nval, sval`,
        )
        .raw()
        .all(lo, hi);
      // within an item the order is the index's; compared as each item's sorted rows
      const byItem = (rows: unknown[][]) => rows.map((r) => JSON.stringify(r)).sort();
      expect(byItem(c.values)).toEqual(byItem(values as unknown[][]));
      expect(c.values.map((v) => v[0])).toEqual(
        [...c.values.map((v) => v[0])].sort((x, y) => x - y),
      );
      const terms = db
        .prepare(
          `SELECT item_pk, term FROM item_terms WHERE item_pk BETWEEN ? AND ? ORDER BY item_pk, term`,
        )
        .raw()
        .all(lo, hi);
      expect(c.terms).toEqual(terms);
    }
    // every float came back to the last bit
    const ours = new Set(items.map((r) => (r as [number])[0]));
    const prices = chunks.flatMap((c) =>
      c.values.filter((v) => v[1] === 'price' && ours.has(v[0])).map((v) => v[5]),
    );
    expect(prices).toHaveLength(N);
    expect(prices.every((p, i) => Object.is(p, i * 0.1 + 0.2))).toBe(true);
  });

  it('build an index that answers as the SQL oracle, exact float bounds included', async () => {
    const engine = new EmbeddedSearchEngine(db);
    const oracle = new SqlSearchEngine(db);
    const at = 1234;
    const price = at * 0.1 + 0.2;
    const queries: Condition[][] = [
      [],
      [{ kind: 'range', field: 'price', gte: price, lte: price }],
      [{ kind: 'range', field: 'tiny', lte: 5e-324, gte: 5e-324 }],
      [{ kind: 'match', field: 'tags', values: ['t3'] }],
      [{ kind: 'match', field: 'name', values: [metadataOf(at).name] }],
      [{ kind: 'match', field: 'flag', values: ['true'] }],
      [{ kind: 'text', terms: ['größe'] }],
    ];
    const sort = { field: 'ratio', order: 'asc' as const };
    for (const conditions of queries) {
      const req = { conditions, sort, offset: 0, limit: 5 };
      const [got, want] = [await engine.search('a', req), await oracle.search('a', req)];
      expect(want.total).toBeGreaterThan(0);
      expect({ conditions, total: got.total, ids: got.items.map((i) => i.id) }).toEqual({
        conditions,
        total: want.total,
        ids: want.items.map((i) => i.id),
      });
    }
    expect(engine.lastBuild?.items).toBe(N);
    expect(
      (await engine.search('a', { conditions: queries[1]!, sort, offset: 0, limit: 5 })).items.map(
        (i) => i.id,
      ),
    ).toEqual([`a${at}`]);
  });

  it("reject with SQLite's code when the thread cannot read the file", async () => {
    const copy = path.join(tempDir('vss-index-read-gone-'), 'store.db');
    const gone = openDb(copy);
    try {
      fs.rmSync(copy);
      const read = async () => {
        for await (const c of readInThread({ file: copy, datasetId: 'a', chunk: 10 })) void c;
      };
      await expect(read()).rejects.toMatchObject({ code: 'SQLITE_CANTOPEN' });
    } finally {
      gone.close();
    }
  });
});
