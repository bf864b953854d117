import { itemFromJsonLine } from '../../src/cli/import/items';
import { convertValue, inferValue, parseTypes } from '../../src/cli/import/types';
import { LIMITS } from '../../src/domain/limits';

describe('type inference of CSV cells', () => {
  it.each([
    ['42', 42],
    ['-3', -3],
    ['0', 0],
    ['12.50', 12.5],
    ['1e3', 1000],
    ['-0.25', -0.25],
    ['true', true],
    ['FALSE', false],
    ['True', true],
    ['boots', 'boots'],
    // kept as text: leading zeros, beyond 2^53, signs and forms that would not round-trip
    ['007', '007'],
    ['12345678901234567890', '12345678901234567890'],
    ['+5', '+5'],
    ['1,5', '1,5'],
    ['.5', '.5'],
    ['NaN', 'NaN'],
    ['Infinity', 'Infinity'],
    ['1e999', '1e999'],
    ['yes', 'yes'],
    ['2024-01-05', '2024-01-05'],
  ])('%j → %j', (raw, value) => {
    expect(inferValue(raw)).toBe(value);
  });
});

describe('--types', () => {
  it('parses the declared types (array is an array of strings)', () => {
    expect([
      ...parseTypes('price=number, tags=array,instock=boolean,sizes=number[],sku=string'),
    ]).toEqual([
      ['price', 'number'],
      ['tags', 'string[]'],
      ['instock', 'boolean'],
      ['sizes', 'number[]'],
      ['sku', 'string'],
    ]);
    expect(parseTypes(undefined).size).toBe(0);
  });

  it('refuses date, which is not a metadata type, and unknown types, naming each', () => {
    expect(() => parseTypes('added=date,x=float,broken')).toThrow(
      /'added=date': the service has no date type.*'x=float': unknown type 'float'.*'broken': expected field=type/,
    );
  });

  it('converts to declared types', () => {
    expect(convertValue('007', 'number')).toEqual({ value: 7 });
    expect(convertValue('007', 'string')).toEqual({ value: '007' });
    expect(convertValue('abc', 'number')).toEqual({ error: "'abc' is not a number" });
    expect(convertValue('', 'number')).toEqual({ error: "'' is not a number" });
    expect(convertValue('Yes', 'boolean')).toEqual({ value: true });
    expect(convertValue('0', 'boolean')).toEqual({ value: false });
    expect(convertValue('maybe', 'boolean')).toEqual({
      error: "'maybe' is not a boolean (true/false, yes/no, 1/0)",
    });
    expect(convertValue('a||b|', 'string[]')).toEqual({ value: ['a', 'b'] });
    expect(convertValue('1|2.5', 'number[]')).toEqual({ value: [1, 2.5] });
  });
});

describe('JSON Lines records to items', () => {
  const none = new Map();

  it('takes metadata from a metadata object or from the other top-level keys', () => {
    expect(
      itemFromJsonLine('{"id":"a","url":"http://x/a.png","metadata":{"price":1}}', none),
    ).toEqual({ ok: true, item: { id: 'a', url: 'http://x/a.png', metadata: { price: 1 } } });
    expect(
      itemFromJsonLine('{"id":"a","url":"http://x/a.png","price":1,"tags":["x"]}', none),
    ).toEqual({
      ok: true,
      item: { id: 'a', url: 'http://x/a.png', metadata: { price: 1, tags: ['x'] } },
    });
    expect(itemFromJsonLine('{"id":"a","url":"http://x/a.png"}', none)).toEqual({
      ok: true,
      item: { id: 'a', url: 'http://x/a.png' },
    });
    expect(
      itemFromJsonLine('{"id":"a","url":"u","privateMetadata":{"cost":3},"b":true}', none),
    ).toEqual({
      ok: true,
      item: { id: 'a', url: 'u', metadata: { b: true }, privateMetadata: { cost: 3 } },
    });
  });

  it('turns integer ids into strings', () => {
    expect(itemFromJsonLine('{"id":17,"url":"u"}', none)).toEqual({
      ok: true,
      item: { id: '17', url: 'u' },
    });
  });

  it('converts string values of declared fields', () => {
    const types = parseTypes('price=number,tags=array');
    expect(itemFromJsonLine('{"id":"a","url":"u","price":"9.5","tags":"x|y"}', types)).toEqual({
      ok: true,
      item: { id: 'a', url: 'u', metadata: { price: 9.5, tags: ['x', 'y'] } },
    });
    expect(itemFromJsonLine('{"id":"a","url":"u","price":"cheap"}', types)).toEqual({
      ok: false,
      id: 'a',
      reason: "price: 'cheap' is not a number",
    });
  });

  it.each([
    ['{"id":"a",', /^invalid JSON: /],
    ['[1,2]', /^a line must hold a JSON object$/],
    ['{"url":"u"}', /^missing id$/],
    ['{"id":"a"}', /^missing url$/],
    ['{"id":"a","url":""}', /^missing url$/],
    ['{"id":{"x":1},"url":"u"}', /^id must be a string$/],
    ['{"id":"a","url":5}', /^url must be a string$/],
    ['{"id":"a","url":"u","metadata":[1]}', /^metadata must be a JSON object$/],
    ['{"id":"a","url":"u","metadata":{"p":1},"p":2}', /'p' is given both/],
    [`{"id":"${'x'.repeat(LIMITS.itemIdMaxLength + 1)}","url":"u"}`, /at most 100$/],
  ])('rejects %s', (line, reason) => {
    const r = itemFromJsonLine(line, none);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(reason);
  });
});
