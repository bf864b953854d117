/**
 * The similarity setting's rules (contract §20): what a change asks for, what a refit waits
 * for, and the 400s a client meets.
 */
import { AppError } from '../../src/domain/errors';
import {
  TUNING_OFF,
  checkSimilarityInput,
  labelChange,
  labelOf,
  requested,
  type SimilaritySettings,
} from '../../src/domain/tuning/settings';

const active: SimilaritySettings = {
  ...TUNING_OFF,
  learnFrom: 'kind',
  weight: 0.75,
  state: 'active',
  model: 'm1',
  revision: 3,
};

test('a new field or weight is fitted again; the same setting changes nothing', () => {
  expect(requested(active, { learnFrom: 'kind', weight: 0.75 })).toBeUndefined();
  expect(requested(active, { learnFrom: 'kind', weight: 0.5 })).toMatchObject({
    learnFrom: 'kind',
    weight: 0.5,
    state: 'fitting',
    revision: 4,
    // kept for the refit to reuse: the same items fit the same projection
    model: 'm1',
  });
  expect(requested(active, { learnFrom: 'group', weight: 0.75 })).not.toHaveProperty('model');
  expect(requested(active, { learnFrom: null, weight: 0.75 })).toMatchObject({
    learnFrom: null,
    state: 'off',
    revision: 4,
  });
});

test('the labelled items moved: gained, lost and moved between labels', () => {
  expect(labelChange({ a: 50, b: 50 }, { a: 50, b: 50 })).toBe(0);
  expect(labelChange({ a: 50, b: 50 }, { a: 45, b: 55 })).toBeCloseTo(0.1);
  expect(labelChange({ a: 50, b: 50 }, { a: 50, b: 50, c: 10 })).toBeCloseTo(0.1);
  expect(labelChange({ a: 50, b: 50 }, { a: 50 })).toBeCloseTo(0.5);
  expect(labelChange({}, { a: 3 })).toBe(1);
  expect(labelChange({}, {})).toBe(0);
});

test('labels are strings or finite numbers, as q reads them', () => {
  expect(labelOf('shoes')).toBe('shoes');
  expect(labelOf(3)).toBe('3');
  for (const v of ['', true, null, undefined, ['a'], { a: 1 }, Number.NaN])
    expect(labelOf(v)).toBeUndefined();
});

test('a bad setting names every field wrong', () => {
  expect(checkSimilarityInput({ learnFrom: 'kind' })).toEqual({ learnFrom: 'kind', weight: 0.75 });
  expect(checkSimilarityInput({ learnFrom: null, weight: 0 })).toEqual({
    learnFrom: null,
    weight: 0,
  });
  try {
    checkSimilarityInput({ learnFrom: '', weight: -0.1 });
    throw new Error('accepted');
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).details!.map((d) => (d as { field: string }).field)).toEqual([
      'learn_from',
      'weight',
    ]);
  }
  expect(() => checkSimilarityInput({ learnFrom: 'x'.repeat(257) })).toThrow(/learn_from/);
  expect(() => checkSimilarityInput({ learnFrom: 'kind', weight: Number.NaN })).toThrow(/weight/);
});
