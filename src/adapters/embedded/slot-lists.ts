/**
 * A short list of int32s per slot (an item's field values, its words), all kept in one arena:
 * a typed array per item would be two or three heap objects beside a few values each. A list
 * that changes is rewritten in place when it fits and appended otherwise. The space left
 * behind is counted and reclaimed once it outweighs both the live values and the slot count
 * (a compaction visits every slot), so the arena stays within a small multiple of the live
 * values plus the slot count, however the lists change or shrink.
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

  /**
   * Makes the slot's list the first `n` values of `src` (n = 0 empties it). `src` must not be
   * a view of `data`: a list rewritten in place would read what it has just written.
   */
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
    if (this.wasteful()) this.compact(0);
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

  private wasteful(): boolean {
    return this.garbage >= Math.max(256, this.lengths.length, this.end - this.garbage);
  }

  /** Room for `n` more values at the end: compacts when that reclaims enough, else grows. */
  private reserve(n: number): void {
    if (this.end + n <= this.data.length) return;
    if (this.wasteful()) return this.compact(n);
    const data = new Int32Array(Math.max(this.data.length * 2, this.end + n));
    data.set(this.data.subarray(0, this.end));
    this.data = data;
  }

  /** Copies the live lists in slot order into an arena with room for twice them plus `n`. */
  private compact(n: number): void {
    const live = this.end - this.garbage;
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
