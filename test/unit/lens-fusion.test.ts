import fc from 'fast-check';
import type { ScoredItem } from '../../src/ports/search-engine';
import { bestOf } from '../../src/services/ranking';

const item = (id: string) => ({ id }) as ScoredItem['item'];

/** Each query vector's own top `limit`, as an engine answers it. */
function topOf(scores: Map<string, number>, limit: number): ScoredItem[] {
  return [...scores]
    .map(([id, score]) => ({ item: item(id), score }))
    .sort((a, b) => b.score - a.score)
    .slice(0, limit);
}

describe('bestOf: a lens query searched with several vectors', () => {
  it('equals the top of every item scored at its best over all vectors', () => {
    const ids = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 3 }), {
      minLength: 1,
      maxLength: 30,
    });
    fc.assert(
      fc.property(
        ids,
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 12 }),
        fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
        (itemIds, views, limit, draws) => {
          const perView = Array.from(
            { length: views },
            () => new Map(itemIds.map((id) => [id, draws.next().value as number])),
          );
          const fused = bestOf(
            perView.map((s) => topOf(s, limit)),
            limit,
          );
          const exact = itemIds
            .map((id) => Math.max(...perView.map((s) => s.get(id)!)))
            .sort((a, b) => b - a)
            .slice(0, limit);
          expect(fused.map((h) => h.score)).toEqual(exact);
          expect(new Set(fused.map((h) => h.item.id)).size).toBe(fused.length);
          for (const h of fused)
            expect(h.score).toBe(Math.max(...perView.map((s) => s.get(h.item.id)!)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
