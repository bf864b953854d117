/**
 * Posting, the set of slots holding one value, against a plain set under random changes: a
 * lone slot is kept without a list, then a list, then a bitset once that is smaller.
 */
import fc from 'fast-check';
import { wordsFor } from '../../src/adapters/embedded/bitset';
import { Posting } from '../../src/adapters/embedded/posting';

const sorted = (xs: Iterable<number>) => [...xs].sort((a, b) => a - b).join();

function agrees(p: Posting, model: Set<number>, top: number): boolean {
  const seen: number[] = [];
  p.forEach((s) => seen.push(s));
  const filter = new Uint32Array(wordsFor(top + 1));
  for (let s = 0; s <= top; s += 3) filter[s >>> 5]! |= 1 << (s & 31);
  const inFilter = [...model].filter((s) => s % 3 === 0);
  const within: number[] = [];
  p.forEachIn(filter, (s) => within.push(s));
  const ored = new Uint32Array(wordsFor(top + 1));
  p.orInto(ored);
  const back: number[] = [];
  for (let s = 0; s <= top; s++) if (ored[s >>> 5]! & (1 << (s & 31))) back.push(s);
  return (
    p.size === model.size &&
    sorted(seen) === sorted(model) &&
    p.countIn(filter) === inFilter.length &&
    sorted(within) === sorted(inFilter) &&
    sorted(back) === sorted(model)
  );
}

describe('Posting', () => {
  it('holds what was added and not removed, as a list and as a bitset', () => {
    fc.assert(
      fc.property(
        // long enough for 64 slots at once: the bitset
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 400 })), {
          minLength: 200,
          maxLength: 600,
        }),
        (ops) => {
          const p = new Posting();
          const model = new Set<number>();
          for (const [add, slot] of ops) {
            // callers add a slot at most once
            if (add && !model.has(slot)) {
              p.add(slot);
              model.add(slot);
            } else if (!add) {
              p.remove(slot);
              model.delete(slot);
            }
          }
          // a boolean, not expect(): a failing case is replayed many times while it is shrunk
          return agrees(p, model, 400);
        },
      ),
    );
  });

  it('keeps every slot when a low slot is added last, as a changed item re-adds its own', () => {
    const p = new Posting();
    const model = new Set<number>();
    for (let s = 100; s < 164; s++) {
      p.add(s);
      model.add(s);
    }
    p.add(5);
    model.add(5);
    expect(agrees(p, model, 200)).toBe(true);
  });

  it('keeps a lone slot without a list', () => {
    const p = new Posting();
    const empty = p.bytes();
    p.add(7);
    expect(p.bytes()).toBe(empty);
    p.remove(8);
    expect(p.size).toBe(1);
    p.remove(7);
    expect(p.size).toBe(0);
    p.add(9);
    p.add(11);
    expect(p.bytes()).toBeGreaterThan(empty);
  });
});
