import fc from 'fast-check';
import { areaResize } from '../../src/adapters/embedders/area-resize';

/** One output value straight from its definition: the input area it covers, in 2-D. */
function bruteForce(data: Uint8Array, from: number, to: number, o: number): number {
  const s = from / to;
  const [ox, oy, c] = [Math.floor(o / 3) % to, Math.floor(o / 3 / to), o % 3];
  let sum = 0;
  for (let y = Math.floor(oy * s); y < Math.min(from, Math.ceil((oy + 1) * s)); y++)
    for (let x = Math.floor(ox * s); x < Math.min(from, Math.ceil((ox + 1) * s)); x++) {
      const wy = Math.min((oy + 1) * s, y + 1) - Math.max(oy * s, y);
      const wx = Math.min((ox + 1) * s, x + 1) - Math.max(ox * s, x);
      sum += wx * wy * data[(y * from + x) * 3 + c]!;
    }
  return Math.round(sum / (s * s));
}

test('2 × 2 blocks average exactly; a plain image stays plain', () => {
  const data = Uint8Array.from(
    [0, 0, 0, 10, 20, 30, 100, 100, 100, 250, 250, 250].concat(Array(12).fill(7)),
  );
  // rows: [p0 p1] [p2 p3] / [7 7] [7 7]
  const got = areaResize({ data, size: 4 }, 2).data;
  expect(Array.from(got.subarray(0, 3))).toEqual([
    Math.round((0 + 10 + 7 + 7) / 4),
    Math.round((0 + 20 + 14) / 4),
    Math.round((0 + 30 + 14) / 4),
  ]);
  const plain = new Uint8Array(224 * 224 * 3).fill(93);
  expect(areaResize({ data: plain, size: 224 }, 64).data.every((v) => v === 93)).toBe(true);
});

test('224 → 64 (a fractional 3.5 ×) equals the area mean computed pixel by pixel', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), (seed) => {
      let s = seed;
      const data = new Uint8Array(56 * 56 * 3).map(() => (s = (s * 48271) % 2147483647) & 255);
      const got = areaResize({ data, size: 56 }, 16).data;
      // the two sum in different orders: a rounding step apart at most
      for (let i = 0; i < got.length; i++)
        expect(Math.abs(got[i]! - bruteForce(data, 56, 16, i))).toBeLessThanOrEqual(1);
    }),
    { numRuns: 20 },
  );
  const big = new Uint8Array(224 * 224 * 3).map((_, i) => (i * 31 + (i >> 7)) & 255);
  const got = areaResize({ data: big, size: 224 }, 64);
  expect(got.size).toBe(64);
  let off = 0;
  for (let i = 0; i < got.data.length; i += 7)
    off = Math.max(off, Math.abs(got.data[i]! - bruteForce(big, 224, 64, i)));
  expect(off).toBeLessThanOrEqual(1);
});

test('refuses to enlarge', () => {
  expect(() => areaResize({ data: new Uint8Array(12), size: 2 }, 4)).toThrow(/only shrinks/);
});
