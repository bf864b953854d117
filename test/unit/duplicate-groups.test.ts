import fc from 'fast-check';
import { HYBRID_SHARES, hybridId } from '../../src/adapters/embedders';
import {
  decodeCursor,
  defaultMaxDistance,
  duplicateGroups,
  encodeCursor,
  groupRuns,
  nearCopy,
  pageOf,
  type GroupingInput,
  type NearPair,
} from '../../src/domain/duplicates';

// Contract §18: how the report's groups are formed, ordered and paged (the engines only supply
// the exact groups and the near pairs).
const key = (a: string, b: string) => (a < b ? `${a}|${b}` : `${b}|${a}`);
const input = (over: Partial<GroupingInput> & { dismissed?: string[][] } = {}): GroupingInput => {
  const apart = new Set((over.dismissed ?? []).map(([a, b]) => key(a!, b!)));
  return {
    exact: [],
    near: [],
    apart: (a, b) => apart.has(key(a, b)),
    distance: () => 0.05,
    ...over,
  };
};
const ids = (g: { items: Array<{ id: string }> }) => g.items.map((i) => i.id);

test('groupRuns turns hash-sorted rows into groups, leaving single items out', () => {
  const rows = [
    { id: 'a', hash: 'h1' },
    { id: 'c', hash: 'h1' },
    { id: 'b', hash: 'h2' },
    { id: 'd', hash: 'h3' },
    { id: 'e', hash: 'h3' },
    { id: 'f', hash: 'h3' },
  ];
  expect(groupRuns(rows)).toEqual([
    ['a', 'c'],
    ['d', 'e', 'f'],
  ]);
  expect(groupRuns([])).toEqual([]);
});

test('near pairs join transitively; the distance is to the first item', () => {
  const near: NearPair[] = [
    { a: 'b', b: 'c', distance: 0.04 },
    { a: 'c', b: 'd', distance: 0.1 },
  ];
  const d: Record<string, number> = { c: 0.04, d: 0.13 };
  const [g, ...rest] = duplicateGroups(input({ near, distance: (_, x) => d[x]! }));
  expect(rest).toEqual([]);
  expect(g).toEqual({
    id: `near:${Buffer.from('b').toString('base64url')}`,
    kind: 'near',
    items: [
      { id: 'b', distance: 0 },
      { id: 'c', distance: 0.04 },
      { id: 'd', distance: 0.13 },
    ],
  });
});

test('a dismissed pair never shares a group, even through a third item close to both', () => {
  const near: NearPair[] = [
    { a: 'a', b: 'c', distance: 0.05 },
    { a: 'b', b: 'c', distance: 0.06 },
  ];
  const groups = duplicateGroups(input({ near, dismissed: [['a', 'b']] }));
  expect(groups.map(ids)).toEqual([['a', 'c']]);
  // exact copies too
  const exact = duplicateGroups(input({ exact: [['x', 'y', 'z']], dismissed: [['x', 'y']] }));
  expect(exact.map(ids)).toEqual([['x', 'z']]);
});

test('both kinds: exact groups first, an item in one group; kind=near sees copies at 0', () => {
  const exact = [['a', 'b']];
  const near: NearPair[] = [
    { a: 'a', b: 'c', distance: 0.02 },
    { a: 'd', b: 'e', distance: 0.03 },
  ];
  const both = duplicateGroups(input({ exact, near }));
  expect(both.map((g) => [g.kind, ...ids(g)])).toEqual([
    ['exact', 'a', 'b'],
    ['near', 'd', 'e'],
  ]);
  expect(both[0]!.items.every((i) => i.distance === 0)).toBe(true);
  const nearOnly = duplicateGroups(
    input({ exact, near, kind: 'near', distance: (_, x) => (x === 'b' ? 0 : 0.02) }),
  );
  expect(nearOnly.map((g) => [g.kind, ...ids(g)])).toEqual([
    ['near', 'a', 'b', 'c'],
    ['near', 'd', 'e'],
  ]);
  expect(nearOnly[0]!.items.map((i) => i.distance)).toEqual([0, 0, 0.02]);
  expect(duplicateGroups(input({ exact, near, kind: 'exact' })).map(ids)).toEqual([['a', 'b']]);
});

const idArb = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'é', '10', '9');
const pairArb = fc
  .record({ a: idArb, b: idArb, distance: fc.double({ min: 0, max: 0.2, noNaN: true }) })
  .filter((p) => p.a !== p.b);

test('any input: one group per item, no apart pair together, ordered by size then first id', () => {
  fc.assert(
    fc.property(
      fc.array(fc.uniqueArray(idArb, { minLength: 2, maxLength: 4 }), { maxLength: 3 }),
      fc.array(pairArb, { maxLength: 25 }),
      fc.array(fc.tuple(idArb, idArb), { maxLength: 6 }),
      fc.constantFrom(undefined, 'exact' as const, 'near' as const),
      (exactRaw, near, dismissed, kind) => {
        // exact groups are disjoint by nature (one hash per item)
        const seen = new Set<string>();
        const exact = exactRaw
          .map((g) => g.filter((id) => !seen.has(id) && (seen.add(id), true)))
          .filter((g) => g.length > 1);
        const inp = input({ exact, near, dismissed, ...(kind ? { kind } : {}) });
        const groups = duplicateGroups(inp);
        // comparing only the items that can be kept apart changes nothing but the cost
        const bound = new Set<string>(dismissed.flat());
        expect(duplicateGroups({ ...inp, constrained: (id) => bound.has(id) })).toEqual(groups);
        const all = groups.flatMap(ids);
        expect(new Set(all).size).toBe(all.length);
        for (const g of groups) {
          expect(g.items.length).toBeGreaterThan(1);
          const m = ids(g);
          expect(m[0]).toBe([...m].sort()[0]);
          for (const x of m) for (const y of m) if (x !== y) expect(inp.apart(x, y)).toBe(false);
          if (g.kind === 'exact') expect(g.items.every((i) => i.distance === 0)).toBe(true);
        }
        for (let i = 1; i < groups.length; i++) {
          const [p, q] = [groups[i - 1]!, groups[i]!];
          expect(
            p.items.length > q.items.length ||
              (p.items.length === q.items.length && p.items[0]!.id < q.items[0]!.id),
          ).toBe(true);
        }
        // paging through with cursors gives the same groups, once each
        for (const limit of [1, 2, 5]) {
          const paged = [];
          let after: ReturnType<typeof decodeCursor>;
          for (let n = 0; n < 100; n++) {
            const page = pageOf(groups, limit, after);
            paged.push(...page.groups);
            if (!page.next) break;
            after = decodeCursor(page.next);
            expect(after).toBeDefined();
          }
          expect(paged).toEqual(groups);
        }
      },
    ),
  );
});

test('a cursor this service did not write is refused', () => {
  const good = encodeCursor({ size: 3, first: 'item-7' });
  expect(decodeCursor(good)).toEqual({ size: 3, first: 'item-7' });
  for (const bad of [
    '',
    'x',
    `${good}=`,
    `${good}!`,
    Buffer.from('[1,"a"]').toString('base64url'),
    Buffer.from('[3,""]').toString('base64url'),
    Buffer.from('[2.5,"a"]').toString('base64url'),
    Buffer.from('{"size":3}').toString('base64url'),
    Buffer.from('[3,"a",1]').toString('base64url'),
  ])
    expect(decodeCursor(bad)).toBeUndefined();
  fc.assert(
    fc.property(fc.string(), (s) => {
      const p = decodeCursor(s);
      if (p) expect(encodeCursor(p)).toBe(s);
    }),
  );
});

test('a picture shared by 20,000 items is one group, in linear time', () => {
  const many = Array.from({ length: 20_000 }, (_, i) => `sku-${String(i).padStart(5, '0')}`);
  const groups = duplicateGroups({
    exact: [many],
    near: [],
    kind: 'near',
    apart: (a, b) =>
      (a === 'sku-00001' && b === 'sku-00002') || (a === 'sku-00002' && b === 'sku-00001'),
    constrained: (id) => id === 'sku-00001' || id === 'sku-00002',
    distance: () => 0,
  });
  // sku-00002 is kept apart from sku-00001 only: it is left out of the group they would share
  expect(groups.map((g) => g.items.length)).toEqual([19_999]);
  expect(groups[0]!.items.map((i) => i.id)).not.toContain('sku-00002');
});

test("the 8-bit model's ids take their float model's limits; another model the fallback", () => {
  expect(defaultMaxDistance('efficientnet-lite0-int8-v1')).toBe(
    defaultMaxDistance('efficientnet-lite0-v1'),
  );
  expect(defaultMaxDistance(hybridId(HYBRID_SHARES, 'int8'))).toBe(defaultMaxDistance(hybridId()));
  expect(defaultMaxDistance('efficientnet-lite0-v1')).not.toBe(defaultMaxDistance(hybridId()));
  const alone = (embedder: string) => nearCopy({ distance: 0.12 }, 0.2, embedder);
  expect(alone('efficientnet-lite0-int8-v1')).toBe(alone('efficientnet-lite0-v1'));
  expect(alone('efficientnet-lite0-int8-v1')).not.toBe(alone('my-model-v1'));
});
