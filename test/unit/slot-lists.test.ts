/**
 * SlotLists, every item's lists of the embedded index in one arena, against a plain map under
 * random changes: rewritten in place, appended, compacted.
 */
import fc from 'fast-check';
import { SlotLists } from '../../src/adapters/embedded/slot-lists';

const listOf = (l: SlotLists, slot: number): number[] => {
  const at = l.start(slot);
  return Array.from(l.data.subarray(at, at + l.length(slot)));
};

describe('SlotLists', () => {
  it('reads back every slot as last set, through rewrites, growth and compaction', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            // few slots, many rewrites: garbage enough to compact
            fc.integer({ min: 0, max: 30 }),
            fc.array(fc.integer({ min: -5, max: 1 << 30 }), { maxLength: 40, size: 'max' }),
          ),
          // long enough to outgrow the first arena and compact it
          { minLength: 50, maxLength: 400 },
        ),
        (ops) => {
          const l = new SlotLists();
          const model = new Map<number, number[]>();
          for (const [slot, values] of ops) {
            l.set(slot, values);
            model.set(slot, values);
          }
          // a boolean, not expect(): a failing case is shrunk many times, and jest's diff of
          // each would take minutes
          for (let s = 0; s <= 31; s++)
            if (listOf(l, s).join() !== (model.get(s) ?? []).join()) return false;
          return true;
        },
      ),
    );
  });

  it('stays within a bound of the live values and slots, however lists move or shrink', () => {
    const l = new SlotLists();
    const slots = 1000;
    const bound = () => {
      let live = 0;
      for (let s = 0; s < slots; s++) live += l.length(s);
      return 4 * live + 2 * slots + 1024;
    };
    for (let round = 0; round < 50; round++)
      for (let s = 0; s < slots; s++) l.set(s, new Array<number>(2 + ((s + round) % 9)).fill(s));
    expect(l.data.length).toBeLessThanOrEqual(bound());
    // most items deleted: the arena gives their space back
    for (let s = 10; s < slots; s++) l.clear(s);
    expect(l.data.length).toBeLessThanOrEqual(bound());
    for (let s = 0; s < 10; s++) expect(listOf(l, s).every((v) => v === s)).toBe(true);
  });

  it('clears a slot and counts only the first n values given', () => {
    const l = new SlotLists();
    l.set(3, [1, 2, 3, 4], 2);
    expect(listOf(l, 3)).toEqual([1, 2]);
    l.clear(3);
    expect(l.length(3)).toBe(0);
    expect(l.length(10_000)).toBe(0);
  });
});
