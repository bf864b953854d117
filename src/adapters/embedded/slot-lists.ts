/**
 * A short list of int32s per slot (an item's field values, its words), all kept in one arena.
 * A typed array per item costs two or three heap objects and about 250 bytes beside its data,
 * which was most of an item's index memory and of the garbage a build leaves. A list that
 * changes is rewritten in place when it fits and appended otherwise; the space left behind is
 * counted and the arena is compacted once that is half of it, so it stays within twice the
 * live data.
 */
export class SlotLists {
  /** The arena. Replaced when it grows or compacts: read it after `start`, before any `set`. */
  data = new Int32Array(256);
  private starts = new Int32Array(0);
  private lengths = new Int32Array(0);
  private end = 0;
  private garbage = 0;

  length(slot: number): number {
    return slot < this.lengths.length ? this.lengths[slot]! : 0;
  }

  /** Where the slot's list begins in `data` (meaningful while its length is not 0). */
  start(slot: number): number {
    return slot < this.starts.length ? this.starts[slot]! : 0;
  }

  /** Makes the slot's list the first `n` values of `src` (n = 0 empties it). */
  set(slot: number, src: ArrayLike<number>, n = src.length): void {
    if (slot >= this.lengths.length) this.growSlots(slot + 1);
    const old = this.lengths[slot]!;
    if (n > old) {
      this.garbage += old;
      this.lengths[slot] = 0;
      this.reserve(n);
      this.starts[slot] = this.end;
      this.end += n;
    } else this.garbage += old - n;
    const at = this.starts[slot]!;
    for (let i = 0; i < n; i++) this.data[at + i] = src[i]!;
    this.lengths[slot] = n;
  }

  clear(slot: number): void {
    this.set(slot, [], 0);
  }

  bytes(): number {
    return this.data.byteLength + this.starts.byteLength + this.lengths.byteLength;
  }

  private growSlots(need: number): void {
    const cap = Math.max(need, this.lengths.length * 2, 64);
    const starts = new Int32Array(cap);
    starts.set(this.starts);
    const lengths = new Int32Array(cap);
    lengths.set(this.lengths);
    this.starts = starts;
    this.lengths = lengths;
  }

  /** Room for `n` more values at the end: compacts when half the arena is garbage, else grows. */
  private reserve(n: number): void {
    if (this.end + n <= this.data.length) return;
    const live = this.end - this.garbage;
    if (this.garbage * 2 < this.end) {
      const data = new Int32Array(Math.max(this.data.length * 2, this.end + n));
      data.set(this.data.subarray(0, this.end));
      this.data = data;
      return;
    }
    const data = new Int32Array(Math.max(256, (live + n) * 2));
    let end = 0;
    for (let s = 0; s < this.lengths.length; s++) {
      const len = this.lengths[s]!;
      const from = this.starts[s]!;
      this.starts[s] = end;
      for (let i = 0; i < len; i++) data[end++] = this.data[from + i]!;
    }
    this.data = data;
    this.end = end;
    this.garbage = 0;
  }
}
