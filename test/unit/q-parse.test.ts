import fc from 'fast-check';
import { AppError } from '../../src/domain/errors';
import { parseQ } from '../../src/query/parse';

const problem = (q: string) => {
  try {
    parseQ(q);
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return (e as AppError).details![0];
  }
  throw new Error(`expected q=${q} to be rejected`);
};

describe('q parser', () => {
  it('parses equality, any-of, exclusion and ranges', () => {
    expect(parseQ('category:boots,price:10:,size:38|39,colour:!red|blue,qty::5')).toEqual([
      { kind: 'eq', key: 'category', values: ['boots'], pos: 0 },
      { kind: 'range', key: 'price', gte: 10, pos: 15 },
      { kind: 'eq', key: 'size', values: ['38', '39'], pos: 25 },
      { kind: 'not', key: 'colour', values: ['red', 'blue'], pos: 36 },
      { kind: 'range', key: 'qty', lte: 5, pos: 53 },
    ]);
  });

  it('percent-decodes keys and values one by one, after splitting', () => {
    expect(parseQ('title:a%2Cb%3Ac,my%20key:x%7Cy')).toEqual([
      { kind: 'eq', key: 'title', values: ['a,b:c'], pos: 0 },
      { kind: 'eq', key: 'my key', values: ['x|y'], pos: 16 },
    ]);
  });

  it('treats an encoded ! as exclusion', () => {
    expect(parseQ('instock:%21false')).toEqual([
      { kind: 'not', key: 'instock', values: ['false'], pos: 0 },
    ]);
  });

  it('tokenises text search', () => {
    expect(parseQ('text:Red%20Dress')).toEqual([{ kind: 'text', terms: ['red', 'dress'], pos: 0 }]);
  });

  it('accepts ISO dates (colons encoded) and epoch ms on service time fields', () => {
    const [f] = parseQ('service_created_at:2026-01-01T00%3A00%3A00Z:1800000000000');
    expect(f).toEqual({
      kind: 'range',
      key: 'service_created_at',
      gte: Date.parse('2026-01-01T00:00:00Z'),
      lte: 1800000000000,
      pos: 0,
    });
  });

  it('returns no filters for an absent or empty q', () => {
    expect(parseQ(undefined)).toEqual([]);
    expect(parseQ('')).toEqual([]);
  });

  it.each([
    ['category', 0, 'key:value'],
    ['a:b,,c:d', 4, 'empty filter'],
    ['a:b,', 4, 'empty filter'],
    [':x', 0, 'key is empty'],
    ['price:abc:', 6, 'not a number'],
    ['price::', 6, 'at least one bound'],
    ['price:9:1', 6, 'min 9 above max 1'],
    ['a:b:c:d', 5, "too many ':'"],
    ['ok:1,name:%zz', 10, 'percent-encoding'],
    ['name:', 5, 'empty value'],
    ['size:a|', 7, 'empty value'],
    ['size:a|!b', 7, "'!' must prefix"],
    ['text:%20%20', 5, 'at least one word'],
    ['service_updated_at:yesterday:', 19, 'ISO 8601'],
    ['service_updated_at:x', 0, 'range'],
  ])('rejects %s at position %i', (q, position, message) => {
    const d = problem(q);
    expect(d.param).toBe('q');
    expect(d.position).toBe(position);
    expect(d.message).toContain(message);
  });

  it('reports every malformed filter, not only the first', () => {
    try {
      parseQ('a,b:c,d');
      throw new Error('not rejected');
    } catch (e) {
      expect((e as AppError).details!.map((d) => d.position)).toEqual([0, 6]);
    }
  });

  it('never fails with anything but a 400 naming a position inside q', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...'ab:,|!%2C7zé '.split('')), maxLength: 40 }),
        (q) => {
          try {
            parseQ(q);
          } catch (e) {
            expect(e).toBeInstanceOf(AppError);
            const err = e as AppError;
            expect(err.status).toBe(400);
            for (const d of err.details!) {
              expect(d.position).toBeGreaterThanOrEqual(0);
              expect(d.position).toBeLessThanOrEqual(q.length);
            }
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
