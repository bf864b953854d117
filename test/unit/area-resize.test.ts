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
  // a 4 × 4 image whose pixel (x, y) is (10x + y, 40 + x, 200 − 10y)
  const data = new Uint8Array(4 * 4 * 3);
  for (let y = 0; y < 4; y++)
    for (let x = 0; x < 4; x++) data.set([10 * x + y, 40 + x, 200 - 10 * y], (y * 4 + x) * 3);
  const got = areaResize({ data, size: 4 }, 2).data;
  const block = (bx: number, by: number, f: (x: number, y: number) => number) =>
    Math.round(
      (f(2 * bx, 2 * by) +
        f(2 * bx + 1, 2 * by) +
        f(2 * bx, 2 * by + 1) +
        f(2 * bx + 1, 2 * by + 1)) /
        4,
    );
  const want: number[] = [];
  for (let by = 0; by < 2; by++)
    for (let bx = 0; bx < 2; bx++)
      want.push(
        block(bx, by, (x, y) => 10 * x + y),
        block(bx, by, (x) => 40 + x),
        block(bx, by, (_, y) => 200 - 10 * y),
      );
  expect(Array.from(got)).toEqual(want);
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
