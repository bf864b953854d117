import { AppError } from '../../src/domain/errors';
import type { ValueKind } from '../../src/domain/metadata';
import { literalForms } from '../../src/query/ast';
import { parseQ } from '../../src/query/parse';
import { resolveFilters } from '../../src/query/resolve';

const catalogue = new Map<string, Set<ValueKind>>([
  ['colour', new Set<ValueKind>(['string'])],
  ['sizes', new Set<ValueKind>(['string[]'])],
  ['tags', new Set<ValueKind>(['string[]'])],
  ['widths', new Set<ValueKind>(['number[]'])],
]);
const ctx = (enabled: Record<string, string[]> = {}) => ({
  enabled,
  catalogue,
  settingsPath: '/orgs/o/datasets/d/settings/fields',
});
const resolve = (q: string, enabled?: Record<string, string[]>) =>
  resolveFilters(parseQ(q), ctx(enabled));

describe('q resolution against dataset settings', () => {
  it('keeps only the last filter of a repeated scalar key', () => {
    expect(resolve('colour:red,colour:blue')).toEqual([
      { kind: 'match', field: 'colour', values: ['blue'] },
    ]);
  });

  it('ANDs a repeated array key', () => {
    expect(resolve('sizes:s,sizes:m', { sizes: ['*'] })).toEqual([
      { kind: 'match', field: 'sizes', values: ['s'] },
      { kind: 'match', field: 'sizes', values: ['m'] },
    ]);
  });

  it('refuses an array field that is not enabled, naming the field and the endpoint', () => {
    try {
      resolve('colour:red,sizes:s');
      throw new Error('not rejected');
    } catch (e) {
      const d = (e as AppError).details![0];
      expect(d).toMatchObject({ param: 'q', position: 11, field: 'sizes' });
      expect(d.message).toContain('PUT /orgs/o/datasets/d/settings/fields');
    }
  });

  it('refuses values of an array field that are not enabled', () => {
    expect(() => resolve('sizes:xl', { sizes: ['s', 'm'] })).toThrow(
      /'xl' of array field 'sizes' not enabled/,
    );
    expect(resolve('sizes:m', { sizes: ['s', 'm'] })).toHaveLength(1);
  });

  it('treats a field enabled in settings as an array even before content has it', () => {
    expect(resolve('fresh:a,fresh:b', { fresh: ['*'] })).toHaveLength(2);
  });

  it('allows ranges on array fields only when every value is enabled', () => {
    expect(() => resolve('widths:1:', { widths: ['1'] })).toThrow(/needs all its values/);
    expect(resolve('widths:1:', { widths: ['*'] })).toEqual([
      { kind: 'range', field: 'widths', gte: 1 },
    ]);
  });

  it('passes unknown fields through (they match nothing / exclude nothing)', () => {
    expect(resolve('nothing:x')).toEqual([{ kind: 'match', field: 'nothing', values: ['x'] }]);
  });
});

describe('literal forms', () => {
  it('reads numbers and booleans but keeps the string', () => {
    expect(literalForms('10')).toEqual({ str: '10', num: 10 });
    expect(literalForms('-1.5e2')).toEqual({ str: '-1.5e2', num: -150 });
    expect(literalForms('true')).toEqual({ str: 'true', bool: true });
    expect(literalForms('10px')).toEqual({ str: '10px' });
    expect(literalForms('Infinity')).toEqual({ str: 'Infinity' });
  });
});
