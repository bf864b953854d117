/**
 * The console's filter-text edits (src/web/console/lib/filter-text.ts) against the service's own
 * q parser: whatever a box or a range writes into the text, the service reads as the same
 * condition, the sidebar reads back as the same selection, and the rest of the text is kept.
 */
import fc from 'fast-check';
import { parseQ } from '../../src/query/parse';
import {
  selection,
  withRange,
  withValues,
  withoutFields,
} from '../../src/web/console/lib/filter-text';

// A field the sidebar may show: not text search, not a service time field (ranges only).
const field = fc
  .string({ minLength: 1, maxLength: 12 })
  .filter((f) => f !== 'text' && !f.startsWith('service_'));
// A decoded value starting with '!' is an exclusion (contract §5), never a value to tick.
const value = fc.string({ minLength: 1, maxLength: 12 }).filter((v) => !v.startsWith('!'));
const values = fc.uniqueArray(value, { minLength: 1, maxLength: 4 });
// -0 is written as 0, which is the same bound.
const bound = fc.option(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => n + 0),
  { nil: undefined },
);
// Text the sidebar does not own, kept as typed.
const rest = fc.constantFrom('', 'text:red mug', 'other:!a|b', 'price:1:');

test('ticked values: the service reads them as any-of, the sidebar reads them back', () => {
  fc.assert(
    fc.property(rest, field, values, (before, f, vs) => {
      fc.pre(!before.startsWith(`${f}:`));
      const q = withValues(before, f, vs);
      expect(parseQ(q)).toContainEqual(expect.objectContaining({ kind: 'eq', key: f, values: vs }));
      expect(selection(q).values[f]).toEqual(vs);
      expect(q.startsWith(before)).toBe(true);
      expect(withValues(q, f, [])).toBe(before);
    }),
  );
});

test('a range: the service reads the same bounds, the sidebar too', () => {
  fc.assert(
    fc.property(rest, field, bound, bound, (before, f, a, b) => {
      fc.pre(!before.startsWith(`${f}:`) && (a !== undefined || b !== undefined));
      const [min, max] = a !== undefined && b !== undefined && a > b ? [b, a] : [a, b];
      const q = withRange(before, f, { min, max });
      const parsed = parseQ(q).find((x) => x.kind === 'range' && x.key === f);
      expect(parsed).toEqual({
        kind: 'range',
        key: f,
        ...(min !== undefined ? { gte: min } : {}),
        ...(max !== undefined ? { lte: max } : {}),
        pos: expect.any(Number),
      });
      expect(selection(q).ranges[f]).toEqual({ min, max });
      expect(withRange(q, f, {})).toBe(before);
    }),
  );
});

test('edits replace the field clause in place; what the boxes cannot show is left alone', () => {
  expect(withValues('text:mug,colour:red,size:M', 'colour', ['red', 'blue'])).toBe(
    'text:mug,colour:red|blue,size:M',
  );
  expect(withValues('colour:red,', 'size', ['M'])).toBe('colour:red,size:M');
  expect(withValues('colour:!red', 'colour', ['blue'])).toBe('colour:!red');
  expect(withValues('colour:red,colour:blue', 'colour', ['green'])).toBe('colour:red,colour:blue');
  expect([...selection('colour:!red,size:M,text:x').textOnly].sort()).toEqual(['colour', 'text']);
  expect(withoutFields('colour:red,text:mug,price:1:2', ['colour', 'price'])).toBe('text:mug');
  // Readable where the grammar allows: spaces stay spaces, syntax characters are encoded.
  expect(withValues('', 'group', ['Green Leafy Vegetables', 'a,b:c|d'])).toBe(
    'group:Green Leafy Vegetables|a%2Cb%3Ac%7Cd',
  );
});
