import { type Bits, clear, countAnd, grown, has, orInPlace, set, wordsFor } from './bitset';

/**
 * The slots holding one value (or one term, or any value of a field). Rare values keep a
 * small unordered list (4 bytes a slot; removal swaps with the last); once the list would be
 * larger than a bitset over all slots, it becomes that bitset (1 bit a slot). Order never
 * matters: postings are only ever ORed into, or counted against, a dense filter set.
 * Callers add a slot at most once (memory-index.ts removes an item's slots before re-adding).
 * A value only one item holds (an image URL, a title) keeps its slot in `one`, without a list:
 * such values can number one per item.
 */
export class Posting {
  private list: Int32Array | null = null;
  private bits: Bits | null = null;
  /** The slot, while the posting holds at most one and has no list yet. */
  private one = 0;
  /** The highest slot the list has held: the bitset it becomes must cover it. */
  private top = -1;
  size = 0;

  add(slot: number): void {
    if (this.bits) {
      this.bits = grown(this.bits, wordsFor(slot + 1));
      if (!has(this.bits, slot)) {
        set(this.bits, slot);
        this.size++;
      }
      return;
    }
    if (slot > this.top) this.top = slot;
    if (!this.list) {
      if (this.size === 0) {
        this.one = slot;
        this.size = 1;
        return;
      }
      this.list = new Int32Array(4);
      this.list[0] = this.one;
    }
    let list = this.list;
    // A bitset over the slots seen so far is smaller than the list: switch. The slot added
    // need not be the highest (an item changed later keeps its slot), so size it by `top`.
    if (this.size >= 64 && this.size >= wordsFor(this.top + 1)) {
      const bits = new Uint32Array(wordsFor(this.top + 1) * 2);
      for (let i = 0; i < this.size; i++) set(bits, list[i]!);
      set(bits, slot);
      this.bits = bits;
      this.list = null;
      this.size++;
      return;
    }
    if (this.size === list.length) {
      const more = new Int32Array(list.length * 2);
      more.set(list);
      this.list = list = more;
    }
    list[this.size++] = slot;
  }

  remove(slot: number): void {
    if (this.bits) {
      if (has(this.bits, slot)) {
        clear(this.bits, slot);
        this.size--;
      }
      return;
    }
    const list = this.list;
    if (!list) {
      if (this.size && this.one === slot) this.size = 0;
      return;
    }
    for (let i = 0; i < this.size; i++)
      if (list[i] === slot) {
        list[i] = list[--this.size]!;
        return;
      }
  }

  /** target |= this */
  orInto(target: Bits): void {
    if (this.bits) {
      orInPlace(target, this.bits);
      return;
    }
    const list = this.list;
    if (!list) {
      if (this.size) set(target, this.one);
      return;
    }
    for (let i = 0; i < this.size; i++) set(target, list[i]!);
  }

  /** |this ∩ filter| */
  countIn(filter: Bits): number {
    if (this.bits) return countAnd(this.bits, filter);
    const list = this.list;
    if (!list) return this.size && has(filter, this.one) ? 1 : 0;
    let n = 0;
    for (let i = 0; i < this.size; i++) if (has(filter, list[i]!)) n++;
    return n;
  }

  /** Every slot, in no particular order. */
  forEach(fn: (slot: number) => void): void {
    if (this.bits) {
      const b = this.bits;
      for (let i = 0; i < b.length; i++) {
        let w = b[i]!;
        while (w) {
          const t = w & -w;
          fn((i << 5) + (31 - Math.clz32(t)));
          w ^= t;
        }
      }
      return;
    }
    const list = this.list;
    if (!list) {
      if (this.size) fn(this.one);
      return;
    }
    for (let i = 0; i < this.size; i++) fn(list[i]!);
  }

  /** The slots also in `filter`, in no particular order. */
  forEachIn(filter: Bits, fn: (slot: number) => void): void {
    if (this.bits) {
      const b = this.bits;
      const n = Math.min(b.length, filter.length);
      for (let i = 0; i < n; i++) {
        let w = b[i]! & filter[i]!;
        while (w) {
          const t = w & -w;
          fn((i << 5) + (31 - Math.clz32(t)));
          w ^= t;
        }
      }
      return;
    }
    const list = this.list;
    if (!list) {
      if (this.size && has(filter, this.one)) fn(this.one);
      return;
    }
    for (let i = 0; i < this.size; i++) if (has(filter, list[i]!)) fn(list[i]!);
  }

  bytes(): number {
    return ((this.bits ?? this.list)?.byteLength ?? 0) + 48;
  }
}
