import fc from 'fast-check';
import { checkJourney, diversify, steer } from '../../src/domain/journey';
import { journeyParam } from '../../src/api/rest/journey-param';

const parseJourney = (path?: string) => checkJourney(journeyParam(path));

const unit = (v: number[]) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

test('a REST path keeps the last five selections, percent-decoded, and refuses junk', () => {
  expect(parseJourney(undefined)).toEqual([]);
  expect(parseJourney('a,b%2Cc')).toEqual(['a', 'b,c']);
  expect(parseJourney('1,2,3,4,5,6,7')).toEqual(['3', '4', '5', '6', '7']);
  expect(() => parseJourney('a,,b')).toThrow(/empty/);
  expect(() => parseJourney('%E0%A4%A')).toThrow(/percent/);
});

test('steer leans towards earlier selections, newest most, and stays a unit vector', () => {
  const q = steer(
    [1, 0, 0],
    [
      [0, 0, 1],
      [0, 1, 0],
    ],
  );
  expect(Math.hypot(...q)).toBeCloseTo(1, 9);
  expect(q[0]).toBeGreaterThan(q[1]!); // the current selection dominates
  expect(q[1]).toBeGreaterThan(q[2]!); // the newer earlier selection outweighs the older one
  expect(steer([0, 1], [])).toEqual([0, 1]);
});

test('diversify picks the best first and skips near-duplicates for a distinct runner-up', () => {
  const a = { id: 'a', score: 0.99, vector: unit([1, 0.01]) };
  const aCopy = { id: 'a2', score: 0.985, vector: unit([1, 0.012]) };
  const b = { id: 'b', score: 0.9, vector: unit([0.6, 0.8]) };
  expect(diversify([a, aCopy, b], 2).map((x) => x.id)).toEqual(['a', 'b']);
  expect(diversify([a, aCopy], 2).map((x) => x.id)).toEqual(['a', 'a2']); // nothing else left
  // the selected item's own copies are kept off the page
  expect(diversify([a, b], 1, 0.7, [unit([1, 0.011])]).map((x) => x.id)).toEqual(['b']);
});

test('diversify returns k distinct candidates with the most relevant first', () => {
  const cand = fc.record({
    score: fc.double({ min: 0, max: 1, noNaN: true }),
    vector: fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 3, maxLength: 3 }),
  });
  fc.assert(
    fc.property(fc.array(cand, { maxLength: 30 }), fc.integer({ min: 1, max: 10 }), (cs, k) => {
      const out = diversify(cs, k);
      expect(out.length).toBe(Math.min(k, cs.length));
      expect(new Set(out).size).toBe(out.length);
      if (cs.length) expect(out[0]!.score).toBeCloseTo(Math.max(...cs.map((c) => c.score)), 9);
    }),
  );
});
