/**
 * The in-memory index (src/adapters/embedded/memory-index.ts and friends) answers exactly as the
 * SQL engine it replaced (SqlSearchEngine): random small datasets written, processed, updated
 * and deleted through the content store, read between writes (so the index catches up with
 * the change log as well as being built), and random conditions, sorts and figures.
 */
import fc from 'fast-check';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedContent } from '../../src/adapters/embedded/embedded-ports';
import { EmbeddedSearchEngine } from '../../src/adapters/embedded/search-engine';
import { SqlSearchEngine } from '../oracle/sql-search-engine';
import type { FiguresSpec, Figures } from '../../src/domain/figures';
import type { Metadata, MetadataValue } from '../../src/domain/metadata';
import type { Condition } from '../../src/query/ast';
import type { ContentStore } from '../../src/ports/content-store';
import type { SearchEngine } from '../../src/ports/search-engine';

const DS = 'ds1';
const OTHER = 'ds2';
const FIELDS = ['color', 'size', 'tags', 'price', 'title', 'flag'];
const QUERY_FIELDS = [...FIELDS, 'secret', 'nothing', 'image_width', 'image_url'];
// Code-point order differs from UTF-16 order between U+FFFD and U+1F600.
const WORDS = ['red', 'Red', 'blue', 'b', '10', 'true', 'é', '\uFFFD', '\u{1F600}', 'x y', ''];
const NUMS = [0, 1, 1.5, 2, 10, -3, 250.25, 1e6];
const IDS = ['a', 'b', 'c', 'B', 'é', '\u{1F600}', '\uFFFD', 'item-10', 'item-9', 'z'];

const scalar: fc.Arbitrary<MetadataValue> = fc.oneof(
  fc.constantFrom(...WORDS),
  fc.constantFrom(...NUMS),
  fc.boolean(),
);
const value: fc.Arbitrary<MetadataValue> = fc.oneof(
  { weight: 3, arbitrary: scalar },
  fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 3 }),
  fc.array(fc.constantFrom(...NUMS), { minLength: 1, maxLength: 3 }),
);
const metadata: fc.Arbitrary<Metadata> = fc.dictionary(fc.constantFrom(...FIELDS), value, {
  maxKeys: 5,
});
const privateMetadata: fc.Arbitrary<Metadata> = fc.dictionary(
  fc.constantFrom('secret', 'color'),
  scalar,
  { maxKeys: 2 },
);

type Op =
  | { op: 'post'; id: string; md: Metadata; priv: Metadata; url: number; ds: string }
  | { op: 'put'; id: string; md: Record<string, MetadataValue | null> }
  | { op: 'process'; id: string; width: number }
  | { op: 'delete'; ids: string[] }
  | { op: 'read' };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('post' as const),
      id: fc.constantFrom(...IDS),
      md: metadata,
      priv: privateMetadata,
      url: fc.integer({ min: 0, max: 2 }),
      ds: fc.constantFrom(DS, DS, DS, OTHER),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('put' as const),
      id: fc.constantFrom(...IDS),
      md: fc.dictionary(fc.constantFrom(...FIELDS), fc.option(value, { nil: null }), {
        maxKeys: 2,
      }),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant('process' as const),
      id: fc.constantFrom(...IDS),
      width: fc.constantFrom(100, 200, 300),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('delete' as const),
      ids: fc.array(fc.constantFrom(...IDS), { maxLength: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'read' as const }) },
);

const values = fc.array(
  fc.oneof(
    fc.constantFrom(...WORDS),
    fc.constantFrom('1', '10', '1.5', '2', 'false', '250.25', '1e6'),
  ),
  {
    minLength: 1,
    maxLength: 3,
  },
);
const field = fc.constantFrom(...QUERY_FIELDS);
const leaf: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ kind: fc.constant('match' as const), field, values }),
  fc.record({ kind: fc.constant('exclude' as const), field, values }),
  fc
    .record({
      kind: fc.constant('range' as const),
      field,
      gte: fc.option(fc.constantFrom(-5, 0, 1, 1.5, 2, 100, 250.25), { nil: undefined }),
      lte: fc.option(fc.constantFrom(0, 1, 2, 10, 300, 1e6), { nil: undefined }),
    })
    .filter((c) => c.gte !== undefined || c.lte !== undefined)
    .map((c) => JSON.parse(JSON.stringify(c)) as Condition),
  fc
    .record({
      kind: fc.constant('timeRange' as const),
      field: fc.constantFrom('service_created_at' as const, 'service_updated_at' as const),
      gte: fc.option(
        fc.integer({ min: 0, max: 40 }).map((n) => T0 + n * HOUR),
        { nil: undefined },
      ),
      lte: fc.option(
        fc.integer({ min: 0, max: 40 }).map((n) => T0 + n * HOUR),
        { nil: undefined },
      ),
    })
    .filter((c) => c.gte !== undefined || c.lte !== undefined)
    .map((c) => JSON.parse(JSON.stringify(c)) as Condition),
  fc.record({
    kind: fc.constant('text' as const),
    terms: fc.array(fc.constantFrom('red', 'blue', 'x', 'y', 'é', 'b', '10', 'none'), {
      minLength: 1,
      maxLength: 2,
    }),
  }),
  fc.record({ kind: fc.constant('exists' as const), field }),
);
const condition: fc.Arbitrary<Condition> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('any' as const),
      of: fc.array(fc.array(leaf, { maxLength: 2 }), { maxLength: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('none' as const),
      of: fc.array(leaf, { maxLength: 2 }),
    }),
  },
);
const conditions = fc.oneof(fc.constant<Condition[]>([]), fc.array(condition, { maxLength: 2 }));

/** Enough writes that most datasets have processed items to find. */
const ops = fc.array(op, { minLength: 10, maxLength: 60 });

const T0 = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;

function vectorOf(id: string, width: number): number[] {
  let h = width;
  for (const ch of id) h = (h * 31 + ch.codePointAt(0)!) % 1000003;
  const v = [Math.sin(h), Math.cos(h * 7), Math.sin(h * 13), Math.cos(h * 3)];
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

interface World {
  db: Db;
  store: ContentStore;
  memory: EmbeddedSearchEngine;
  sql: SqlSearchEngine;
}

async function play(ops: Op[]): Promise<World> {
  const db = openDb(':memory:');
  const store = embeddedContent(db);
  const world = { db, store, memory: new EmbeddedSearchEngine(db), sql: new SqlSearchEngine(db) };
  let t = 0;
  const datasetOf = new Map<string, string>();
  for (const o of ops) {
    // Some writes share a time, so ties by id are exercised.
    const now = T0 + Math.floor(t++ / 2) * HOUR;
    switch (o.op) {
      case 'post': {
        const ds = datasetOf.get(o.id) ?? o.ds;
        datasetOf.set(o.id, ds);
        const url = `https://img.example.com/${encodeURIComponent(o.id)}-${o.url}.jpg`;
        await store.applyWrites(
          ds,
          [{ id: o.id, url, metadata: o.md, privateMetadata: o.priv }],
          'post',
          now,
        );
        break;
      }
      case 'put':
        await store.applyWrites(
          datasetOf.get(o.id) ?? DS,
          [{ id: o.id, metadata: o.md }],
          'put',
          now,
        );
        break;
      case 'process': {
        const ds = datasetOf.get(o.id) ?? DS;
        const [item] = await store.getItems(ds, [o.id]);
        if (!item) break;
        await store.markProcessed(
          { datasetId: ds, itemId: o.id, url: item.url, attempt: 1 },
          {
            width: o.width,
            height: 50,
            format: 'jpeg',
            vector: vectorOf(o.id, o.width),
            embedder: 'e1',
          },
          now,
        );
        break;
      }
      case 'delete':
        await store.deleteItems(DS, o.ids);
        for (const id of o.ids) if (datasetOf.get(id) === DS) datasetOf.delete(id);
        break;
      case 'read':
        // Builds (or catches up) the index mid-way, so later writes go through the change log.
        await world.memory.search(DS, {
          conditions: [],
          sort: { field: 'price', order: 'asc' },
          offset: 0,
          limit: 3,
        });
        await world.memory.search(DS, {
          conditions: [],
          sort: { field: 'color', order: 'desc' },
          offset: 0,
          limit: 100,
        });
        break;
    }
  }
  return world;
}

/** Sums and averages may differ in the last bits (summation order); all else is exact. */
function rounded(f: Figures): Figures {
  return JSON.parse(
    JSON.stringify(f, (k, v: unknown) =>
      (k === 'sum' || k === 'avg') && typeof v === 'number' ? Number(v.toPrecision(12)) : v,
    ),
  ) as Figures;
}

async function outcome<T>(p: Promise<T>): Promise<T | { error: string }> {
  try {
    return await p;
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/** How often the answers were non-trivial, so a generator gone blind fails the test. */
const seen = { answers: 0, errors: 0, nonEmpty: 0 };

async function both<T>(w: World, f: (e: SearchEngine) => Promise<T>) {
  const out = await Promise.all([outcome(f(w.memory)), outcome(f(w.sql))]);
  seen.answers++;
  const b = out[1] as unknown;
  if (b && typeof b === 'object' && 'error' in b) seen.errors++;
  else if (
    JSON.stringify(b) !== JSON.stringify({ ids: [], total: 0 }) &&
    JSON.stringify(b) !== '[]'
  )
    seen.nonEmpty++;
  return out;
}

const sortSpec = fc.record({
  field: fc.constantFrom(
    ...FIELDS,
    'secret',
    'nothing',
    'image_width',
    'service_created_at',
    'service_updated_at',
  ),
  order: fc.constantFrom('asc' as const, 'desc' as const),
});

const RUNS = Number(process.env.PROPERTY_RUNS ?? 150);

describe('embedded in-memory index equals the SQL engine', () => {
  afterAll(() => {
    console.log(`answers compared: ${JSON.stringify(seen)}`);
    expect(seen.nonEmpty).toBeGreaterThan(seen.answers / 4);
    expect(seen.errors).toBeLessThan(seen.answers / 10);
  });

  it('search: ids in order and total', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(
          fc.tuple(
            conditions,
            sortSpec,
            fc.integer({ min: 0, max: 4 }),
            fc.integer({ min: 1, max: 12 }),
          ),
          {
            minLength: 1,
            maxLength: 4,
          },
        ),
        async (ops, queries) => {
          const w = await play(ops);
          for (const [conds, sort, offset, limit] of queries) {
            const [a, b] = await both(w, (e) =>
              e.search(DS, { conditions: conds, sort, offset, limit }).then((r) => ({
                ids: r.items.map((i) => i.id),
                total: r.total,
              })),
            );
            expect(a).toEqual(b);
          }
          // counts() answers from the index once it is in memory: the same as SQL's.
          const rows = w.db
            .prepare('SELECT state, COUNT(*) AS n FROM items WHERE dataset_id = ? GROUP BY state')
            .all(DS) as Array<{ state: string; n: number }>;
          const by = Object.fromEntries(rows.map((r) => [r.state, r.n]));
          expect(await w.store.counts(DS)).toEqual({
            items: rows.reduce((n, r) => n + r.n, 0),
            processed: by.processed ?? 0,
            pending: by.pending ?? 0,
            errors: 0,
          });
          w.db.close();
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('facets and analytics', async () => {
    const spec: fc.Arbitrary<FiguresSpec> = fc.record({
      facets: fc.uniqueArray(
        fc.record({ field: fc.constantFrom(...QUERY_FIELDS), disjunctive: fc.boolean() }),
        { maxLength: 3, selector: (f) => f.field },
      ),
      facetSize: fc.integer({ min: 1, max: 4 }),
      stats: fc.uniqueArray(fc.constantFrom(...QUERY_FIELDS), { maxLength: 2 }),
      histograms: fc.uniqueArray(
        fc.oneof(
          fc.record({
            field: fc.constantFrom('price', 'size', 'tags', 'image_width', 'secret'),
            interval: fc.constantFrom(0.5, 1, 7, 100),
          }),
          fc.record({
            field: fc.constantFrom('service_created_at' as const, 'service_updated_at' as const),
            calendar: fc.constantFrom(
              'hour' as const,
              'day' as const,
              'week' as const,
              'month' as const,
            ),
          }),
        ),
        { maxLength: 2, selector: (h) => h.field },
      ),
    });
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(fc.tuple(conditions, spec), { minLength: 1, maxLength: 3 }),
        async (ops, queries) => {
          const w = await play(ops);
          for (const [conds, s] of queries) {
            const [a, b] = await both(w, (e) => e.figures(DS, conds, s).then(rounded));
            expect(a).toEqual(b);
            const fields = s.facets.map((f) => f.field);
            const [c, d] = await both(w, (e) => e.facets(DS, conds, fields));
            expect(c).toEqual(d);
          }
          w.db.close();
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('random sample (explore without an id)', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(
          fc.tuple(
            conditions,
            fc.integer({ min: 0, max: 8 }),
            fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          ),
          {
            minLength: 1,
            maxLength: 3,
          },
        ),
        async (o, queries) => {
          const w = await play(o);
          for (const [conds, limit, seed] of queries) {
            const [a, b] = await both(w, (e) =>
              e.sample(DS, conds, limit, seed).then((r) => r.map((i) => i.id)),
            );
            expect(a).toEqual(b);
          }
          w.db.close();
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('filtered similar', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(
          fc.tuple(
            conditions.filter((c) => c.length > 0),
            fc.integer({ min: 1, max: 6 }),
            fc.subarray(IDS, { maxLength: 2 }),
            fc.constantFrom(...IDS),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        async (ops, queries) => {
          const w = await play(ops);
          for (const [conds, limit, excludeIds, like] of queries) {
            const req = {
              vector: vectorOf(like, 100),
              embedder: 'e1',
              conditions: conds,
              limit,
              excludeIds,
            };
            const [a, b] = await both(w, (e) =>
              e.similar(DS, req).then((r) => r.map((x) => [x.item.id, x.score])),
            );
            expect(a).toEqual(b);
          }
          w.db.close();
        },
      ),
      { numRuns: RUNS },
    );
  });
});
