import type { Pixels } from '../../ports/embedder';

/** Per output index: the first input index it covers and the share of each input it covers. */
function coverage(from: number, to: number): Array<{ start: number; weights: Float64Array }> {
  const scale = from / to;
  return Array.from({ length: to }, (_, o) => {
    const lo = o * scale;
    const hi = lo + scale;
    const start = Math.floor(lo);
    const end = Math.min(from, Math.ceil(hi));
    const weights = new Float64Array(end - start);
    for (let i = start; i < end; i++)
      weights[i - start] = (Math.min(hi, i + 1) - Math.max(lo, i)) / scale;
    return { start, weights };
  });
}

/**
 * A square RGB image shrunk to `size` by area averaging: each output pixel is the mean of the
 * input area it covers, fractions of edge pixels included. In JavaScript, because a libvips
 * pipeline for a 224 → 64 shrink costs more in set-up than this does in all.
 */
export function areaResize(p: Pixels, size: number): Pixels {
  if (size === p.size) return p;
  if (size > p.size) throw new Error(`areaResize only shrinks (${p.size} → ${size})`);
  const cover = coverage(p.size, size);
  const rows = new Float64Array(p.size * size * 3); // each input row, shrunk across
  for (let y = 0; y < p.size; y++)
    for (let x = 0; x < size; x++) {
      const { start, weights } = cover[x]!;
      let r = 0;
      let g = 0;
      let b = 0;
      for (let k = 0; k < weights.length; k++) {
        const at = (y * p.size + start + k) * 3;
        const w = weights[k]!;
        r += p.data[at]! * w;
        g += p.data[at + 1]! * w;
        b += p.data[at + 2]! * w;
      }
      const to = (y * size + x) * 3;
      rows[to] = r;
      rows[to + 1] = g;
      rows[to + 2] = b;
    }
  const out = new Uint8Array(size * size * 3);
  for (let y = 0; y < size; y++) {
    const { start, weights } = cover[y]!;
    for (let i = 0; i < size * 3; i++) {
      let v = 0;
      for (let k = 0; k < weights.length; k++) v += rows[(start + k) * size * 3 + i]! * weights[k]!;
      out[y * size * 3 + i] = Math.round(v);
    }
  }
  return { data: out, size };
}
