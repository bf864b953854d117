/**
 * The tuned-similarity math (contract §20): the shrinkage-LDA fit must find label directions that
 * plain cosine cannot see, must not invent any from random labels, and its application (project,
 * blend, tunedVector, the stored bytes) must agree with itself exactly.
 */
import {
  assignFolds,
  crossValidate,
  fitAndValidate,
} from '../../src/domain/tuning/cross-validation';
import {
  blend,
  blendDocVector,
  blendQueryVector,
  deserialise,
  MIN_SHRINKAGE,
  fitProjection,
  project,
  serialise,
  tunedVector,
  type Labelled,
} from '../../src/domain/tuning/lda';
import { choleskyInPlace, rowBase, symmetricEigen } from '../../src/domain/tuning/linalg';
import { seededRandom } from '../../src/lib/seeded-random';

const unit = (v: Float32Array) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let j = 0; j < a.length; j++) s += a[j]! * b[j]!;
  return s;
};

/**
 * Labels that differ along `signal` directions only, under noise ten times larger in the other
 * dimensions; items come in near-copy pairs (one group each), as a catalogue's duplicates do.
 */
function synthetic(seed: number, classes = 6, perClass = 60, dims = 64, signal = 3): Labelled[] {
  const r = seededRandom(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const centres = Array.from({ length: classes }, () => Array.from({ length: signal }, gauss));
  const items: Labelled[] = [];
  for (let c = 0; c < classes; c++)
    for (let i = 0; i < perClass; i += 2) {
      const v = Float32Array.from({ length: dims }, (_, j) =>
        j < signal ? 0.3 * centres[c]![j]! + 0.03 * gauss() : gauss(),
      );
      const copy = v.map((x) => x + 0.05 * gauss());
      for (const x of [v, copy])
        items.push({ vector: unit(x), label: `c${c}`, group: `${c}/${i}` });
    }
  return items;
}

/** Labels dealt at random to the groups: nothing to learn. */
function shuffledLabels(items: Labelled[], seed: number): Labelled[] {
  const r = seededRandom(seed);
  const labels = [...new Set(items.map((it) => it.label))];
  const of = new Map<string, string>();
  for (const it of items)
    if (!of.has(it.group)) of.set(it.group, labels[Math.floor(r() * labels.length)]!);
  return items.map((it) => ({ ...it, label: of.get(it.group)! }));
}

test('tuning finds label directions drowned in noise, and none in shuffled labels', () => {
  const items = synthetic(1);
  const learnt = crossValidate(items, { weight: 0.75 });
  expect(learnt.folds).toBe(5);
  expect(learnt.queries).toBe(items.length);
  expect(learnt.tuned).toBeGreaterThanOrEqual(learnt.plain + 0.2);

  const random = crossValidate(shuffledLabels(items, 2), { weight: 0.75 });
  expect(random.tuned - random.plain).toBeLessThan(0.02);
});

test('cross-validation scores what fitting each fold on its own would score', () => {
  // the fold fits come from the whole set's sums less the fold's: check them against
  // fitProjection on the training items, ranking every other item by brute force
  const items = synthetic(3, 4, 30);
  const weight = 0.75;
  const cv = crossValidate(items, { weight, seed: 7 });
  const folds = assignFolds(
    items.map((it) => it.group),
    5,
    8,
  );
  let plain = 0;
  let tuned = 0;
  for (let f = 0; f < 5; f++) {
    const p = fitProjection(items.filter((_, i) => folds[i] !== f));
    const z = items.map((it) => project(p, it.vector));
    items.forEach((q, qi) => {
      if (folds[qi] !== f) return;
      const precision = (w: number) =>
        items
          .map((it, i) => ({ i, s: blend(w, dot(q.vector, it.vector), dot(z[qi]!, z[i]!)) }))
          .filter(({ i }) => i !== qi)
          .sort((a, b) => b.s - a.s || a.i - b.i)
          .slice(0, 10)
          .filter(({ i }) => items[i]!.label === q.label).length / 10;
      plain += precision(0);
      tuned += precision(weight);
    });
  }
  expect(cv.plain).toBeCloseTo(plain / items.length, 10);
  expect(cv.tuned).toBeCloseTo(tuned / items.length, 2);
});

test('fitAndValidate is crossValidate and fitProjection at once', () => {
  const items = synthetic(15);
  const both = fitAndValidate(items, { weight: 0.5 });
  expect(both.cv).toEqual(crossValidate(items, { weight: 0.5 }));
  // the same fit, its sums added in another order
  const alone = fitProjection(items);
  expect(both.projection.k).toBe(alone.k);
  both.projection.basis.forEach((v, i) => expect(v).toBeCloseTo(alone.basis[i]!, 4));
});

test('tunedVector dot products are the blend of plain and projected cosines', () => {
  const items = synthetic(4);
  const p = fitProjection(items);
  const r = seededRandom(5);
  for (const weight of [0, 0.3, 0.75, 1])
    for (let n = 0; n < 20; n++) {
      const a = items[Math.floor(r() * items.length)]!.vector;
      const b = items[Math.floor(r() * items.length)]!.vector;
      const expected = blend(weight, dot(a, b), dot(project(p, a), project(p, b)));
      expect(dot(tunedVector(p, weight, a), tunedVector(p, weight, b))).toBeCloseTo(expected, 5);
    }
});

test('a cosine between a stored blend vector and a query one, times toBlend, is the blend', () => {
  const items = synthetic(4);
  const p = fitProjection(items);
  const r = seededRandom(7);
  const cosine = (a: Float32Array, b: Float32Array) => dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b));
  for (const weight of [0, 0.3, 0.75, 1])
    for (let n = 0; n < 20; n++) {
      // embeddings of any norm: the plain cosine is of their directions
      const a = items[Math.floor(r() * items.length)]!.vector.map((x) => x * 3);
      const b = items[Math.floor(r() * items.length)]!.vector;
      const zb = project(p, b);
      const expected = blend(weight, cosine(a, b), dot(project(p, a), zb));
      const q = blendQueryVector(weight, b, zb);
      const stored = blendDocVector(a, project(p, a))!;
      expect(Math.hypot(...stored)).toBeCloseTo(1, 6);
      expect(cosine(stored, q.vector) * q.toBlend).toBeCloseTo(expected, 5);
    }
});

test('a zero projection has no stored blend vector, and a query whose blend is all zero has one', () => {
  const x = Float32Array.from([0.6, 0.8]);
  expect(blendDocVector(x, new Float32Array(3))).toBeUndefined();
  const q = blendQueryVector(1, x, new Float32Array(3));
  expect(q.toBlend).toBe(0);
  expect(Math.hypot(...q.vector)).toBeCloseTo(1, 6);
  // weight 0: the plain cosine alone, whatever the projection
  const plain = blendQueryVector(0, x, Float32Array.from([1, 0, 0]));
  expect(plain.toBlend).toBeCloseTo(Math.SQRT2, 6);
  expect(Array.from(plain.vector.slice(2))).toEqual([0, 0, 0]);
});

test('project returns unit vectors of k = classes − 1 dimensions', () => {
  const items = synthetic(6);
  const p = fitProjection(items);
  expect(p.k).toBe(5);
  for (const it of items.slice(0, 50)) {
    const z = project(p, it.vector);
    expect(z).toHaveLength(5);
    expect(Math.hypot(...z)).toBeCloseTo(1, 5);
  }
  // the centre itself projects onto the zero vector
  expect([...project(p, p.mean)].every((x) => x === 0)).toBe(true);
});

test('the fit is deterministic and its bytes round-trip', () => {
  const items = synthetic(8);
  const bytes = serialise(fitProjection(items));
  expect(serialise(fitProjection(items))).toEqual(bytes);
  const p = deserialise(bytes);
  expect(serialise(p)).toEqual(bytes);
  expect(p).toEqual(fitProjection(items));
  expect(bytes.byteLength).toBe(12 + 4 * (64 + 64 * 5));
});

test('malformed bytes are refused', () => {
  const bytes = serialise(fitProjection(synthetic(9)));
  expect(() => deserialise(bytes.slice(0, bytes.length - 4))).toThrow();
  expect(() => deserialise(new Uint8Array([...bytes, 0, 0, 0, 0]))).toThrow();
  expect(() => deserialise(bytes.slice(0, 8))).toThrow();
  const magic = bytes.slice();
  magic[0] ^= 1;
  expect(() => deserialise(magic)).toThrow();
  const tooWide = bytes.slice();
  new DataView(tooWide.buffer).setUint32(8, 65, true);
  expect(() => deserialise(tooWide)).toThrow();
});

test('a label of one item is left out of the fit; one of 2–4 takes part but is never asked', () => {
  const items = synthetic(10, 2, 20);
  const extra = synthetic(11, 1, 4);
  // interleaved, so that leaving them out is not a matter of order
  const mix = (more: Labelled[]) =>
    items.flatMap((it, i) => (i % 10 === 0 && more[i / 10] ? [more[i / 10]!, it] : [it]));
  const singles = mix(extra.map((it, i) => ({ ...it, label: `own-${i}` })));
  expect(singles).toHaveLength(44);
  expect(serialise(fitProjection(singles))).toEqual(serialise(fitProjection(items)));
  const four = mix(extra.map((it) => ({ ...it, label: 'rare' })));
  expect(fitProjection(four).k).toBe(2);
  // the check's queries are the items of labels with 5 or more
  expect(crossValidate(four, { weight: 0.5, folds: 2 }).queries).toBe(40);
});

test('the scatter is shrunk by MIN_SHRINKAGE at least; projections centre on the class means', () => {
  const r = seededRandom(21);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  // two labels of unequal size, noise correlated across the two dimensions: with 600 items
  // Ledoit–Wolf alone would hardly shrink at all
  const items: Labelled[] = Array.from({ length: 600 }, (_, i) => {
    const a = i < 400;
    const e = gauss();
    const v = [(a ? 0 : 1) + e, (a ? 0 : 0.5) + 0.9 * e + 0.3 * gauss()];
    return { vector: Float32Array.from(v), label: a ? 'a' : 'b', group: `g${i}` };
  });
  const mean = (label: string) => {
    const of = items.filter((it) => it.label === label);
    return [0, 1].map((j) => of.reduce((s, it) => s + it.vector[j]!, 0) / of.length);
  };
  const mu = { a: mean('a'), b: mean('b') };
  const s = [0, 0, 0];
  for (const it of items) {
    const m = mu[it.label as 'a' | 'b'];
    const y = [it.vector[0]! - m[0]!, it.vector[1]! - m[1]!];
    s[0] += (y[0]! * y[0]!) / 600;
    s[1] += (y[0]! * y[1]!) / 600;
    s[2] += (y[1]! * y[1]!) / 600;
  }
  /** The LDA direction S⁻¹(μ_b − μ_a) with the off-diagonal kept at (1 − shrink). */
  const direction = (shrink: number) => {
    const off = (1 - shrink) * s[1]!;
    const d0 = mu.b[0]! - mu.a[0]!;
    const d1 = mu.b[1]! - mu.a[1]!;
    return unit(Float32Array.from([s[2]! * d0 - off * d1, s[0]! * d1 - off * d0]));
  };
  const p = fitProjection(items);
  expect(p.k).toBe(1);
  const fitted = unit(Float32Array.from(p.basis));
  expect(Math.abs(dot(fitted, direction(MIN_SHRINKAGE)))).toBeCloseTo(1, 6);
  // and not what less shrinkage gives
  expect(Math.abs(dot(fitted, direction(0)))).toBeLessThan(0.99);
  // the centre is the mean of the two class means, not of the 600 items
  [0, 1].forEach((j) => expect(p.mean[j]).toBeCloseTo((mu.a[j]! + mu.b[j]!) / 2, 5));
});

test('fewer than 2 labels of 5 items is an error', () => {
  const items = synthetic(12, 2, 10);
  const one = items.map((it, i) => (i < 10 ? it : { ...it, label: `own-${i}` }));
  expect(() => fitProjection(one)).toThrow(/2 labels/);
  expect(() => crossValidate(one, { weight: 0.5 })).toThrow(/2 labels/);
  const fours = items.map((it, i) => ({ ...it, label: `l${Math.floor(i / 4)}` }));
  expect(() => fitProjection(fours)).toThrow(/2 labels/);
});

test('grouped folds: a group never spans two folds, and folds are even', () => {
  const r = seededRandom(13);
  const groups = Array.from({ length: 1000 }, () => `g${Math.floor(r() * 300)}`);
  const folds = assignFolds(groups, 5, 1);
  const foldOf = new Map<string, number>();
  groups.forEach((g, i) => {
    expect(foldOf.get(g) ?? folds[i]).toBe(folds[i]);
    foldOf.set(g, folds[i]!);
  });
  const sizes = [0, 1, 2, 3, 4].map((f) => folds.filter((x) => x === f).length);
  expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(10);
  expect(assignFolds(groups, 5, 1)).toEqual(folds);
  expect(assignFolds(groups, 5, 2)).not.toEqual(folds);
  // fewer groups than folds: one group a fold
  expect(new Set(assignFolds(['a', 'b', 'a'], 5)).size).toBe(2);
});

test('the Cholesky factor and the eigenvectors are exact', () => {
  const n = 21; // not a multiple of the 8-row panels
  const r = seededRandom(14);
  const m = Array.from({ length: n * n }, () => r() - 0.5);
  const full = (i: number, j: number) => {
    let s = i === j ? 0.1 : 0;
    for (let k = 0; k < n; k++) s += m[i * n + k]! * m[j * n + k]!;
    return s;
  };
  const packed = new Float64Array((n * (n + 1)) / 2);
  for (let i = 0; i < n; i++) for (let j = i; j < n; j++) packed[rowBase(i, n) + j] = full(i, j);
  choleskyInPlace(packed, n);
  const u = (k: number, j: number) => (k <= j ? packed[rowBase(k, n) + j]! : 0);
  for (let i = 0; i < n; i++)
    for (let j = i; j < n; j++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += u(k, i) * u(k, j);
      expect(s).toBeCloseTo(full(i, j), 10);
    }

  const a = Float64Array.from({ length: n * n }, (_, x) => full(Math.floor(x / n), x % n));
  const { values, vectors } = symmetricEigen(a.slice(), n);
  for (let e = 0; e < n; e++) {
    if (e > 0) expect(values[e]!).toBeLessThanOrEqual(values[e - 1]!);
    for (let i = 0; i < n; i++) {
      let av = 0;
      for (let k = 0; k < n; k++) av += a[i * n + k]! * vectors[k * n + e]!;
      expect(av).toBeCloseTo(values[e]! * vectors[i * n + e]!, 10);
    }
  }
});
