/**
 * Dense sets of item slots, one bit per slot in 32-bit words. At the sizes this engine serves
 * (up to a few hundred thousand items per dataset) a whole set is tens of kilobytes, so AND, OR
 * and NOT over all of it take microseconds; filters are evaluated this way instead of with
 * compressed bitmaps (see posting.ts for the per-value sets, which do stay small).
 */
export type Bits = Uint32Array;

export const wordsFor = (slots: number): number => (slots + 31) >>> 5;

export const has = (b: Bits, slot: number): boolean => {
  const w = slot >>> 5;
  return w < b.length && (b[w]! & (1 << (slot & 31))) !== 0;
};

export const set = (b: Bits, slot: number): void => {
  b[slot >>> 5]! |= 1 << (slot & 31);
};

export const clear = (b: Bits, slot: number): void => {
  const w = slot >>> 5;
  if (w < b.length) b[w]! &= ~(1 << (slot & 31));
};

/** A copy of `b` at least `words` long (the extra words empty). */
export function grown(b: Bits, words: number): Bits {
  if (b.length >= words) return b;
  const out = new Uint32Array(Math.max(words, b.length * 2));
  out.set(b);
  return out;
}

/** a &= b (words of b past its end count as empty). */
export function andInPlace(a: Bits, b: Bits): Bits {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) a[i]! &= b[i]!;
  a.fill(0, n);
  return a;
}

/** a &= ~b */
export function andNotInPlace(a: Bits, b: Bits): Bits {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) a[i]! &= ~b[i]!;
  return a;
}

/** a |= b (b no longer than a). */
export function orInPlace(a: Bits, b: Bits): Bits {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) a[i]! |= b[i]!;
  return a;
}

function popcount32(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) as number;
}

export function count(b: Bits): number {
  let n = 0;
  for (let i = 0; i < b.length; i++) if (b[i]) n += popcount32(b[i]!);
  return n;
}

/** |a ∩ b| */
export function countAnd(a: Bits, b: Bits): number {
  const n = Math.min(a.length, b.length);
  let c = 0;
  for (let i = 0; i < n; i++) {
    const w = a[i]! & b[i]!;
    if (w) c += popcount32(w);
  }
  return c;
}

/** The slots of `b` in ascending order. */
export function slotsOf(b: Bits): Int32Array {
  const out = new Int32Array(count(b));
  let k = 0;
  for (let i = 0; i < b.length; i++) {
    let w = b[i]!;
    while (w) {
      const t = w & -w;
      out[k++] = (i << 5) + (31 - Math.clz32(t));
      w ^= t;
    }
  }
  return out;
}
