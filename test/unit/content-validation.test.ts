import { checkDeleteIds, parseContentBatch, imageUrlProblem } from '../../src/domain/content';
import { deleteIds } from '../../src/api/rest/delete-ids';
import { parseEnabledFields } from '../../src/domain/dataset';
import { AppError } from '../../src/domain/errors';
import { mergeMetadata } from '../../src/domain/metadata';

const details = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as AppError).details!;
  }
  throw new Error('expected a rejection');
};

describe('content batch validation', () => {
  it('accepts a valid POST batch', () => {
    const w = parseContentBatch(
      {
        content: [
          {
            id: 'a',
            url: 'https://x.test/a.JPG',
            metadata: { p: 1, t: 'x', b: true, s: ['a'], n: [1, 2], e: [] },
          },
        ],
      },
      'post',
    );
    expect(w).toHaveLength(1);
  });

  it('refuses ids with a lone UTF-16 surrogate, naming the item', () => {
    const d = details(() =>
      parseContentBatch(
        {
          content: [
            { id: 'ok-\uD83D\uDE00', url: 'https://x.test/a.png' },
            { id: 'bad-\uD800', url: 'https://x.test/a.png' },
            { id: '\uDC00-bad', url: 'https://x.test/a.png' },
          ],
        },
        'post',
      ),
    );
    expect(d).toEqual([
      expect.objectContaining({
        index: 1,
        id: 'bad-\uD800',
        field: 'id',
        message: expect.stringMatching(/lone UTF-16 surrogate/),
      }),
      expect.objectContaining({ index: 2, id: '\uDC00-bad', field: 'id' }),
    ]);
  });

  it('reports every bad item with index, id and field', () => {
    const d = details(() =>
      parseContentBatch(
        {
          content: [
            { id: 'ok', url: 'https://x.test/a.png' },
            { id: 'x'.repeat(101), url: 'https://x.test/a.png' },
            { id: 'b' },
            { id: 'c', url: 'ftp://x.test/a.png' },
            { id: 'd', url: 'https://x.test/a.gif' },
            {
              id: 'e',
              url: 'https://x.test/a',
              metadata: { nested: { a: 1 }, mixed: [1, 'a'], image_width: 3 },
            },
            'nope',
          ],
        },
        'post',
      ),
    );
    expect(d.map((x) => [x.index, x.field])).toEqual([
      [1, 'id'],
      [2, 'url'],
      [3, 'url'],
      [4, 'url'],
      [5, 'metadata.nested'],
      [5, 'metadata.mixed'],
      [5, 'metadata.image_width'],
      [6, 'content'],
    ]);
    expect(d.find((x) => x.index === 4)!.message).toBe(
      "unsupported image format 'gif' (jpeg, jpg, png)",
    );
    expect(d.find((x) => x.index === 2)!.id).toBe('b');
  });

  it('makes url optional and null a key removal on PUT only', () => {
    expect(
      parseContentBatch({ content: [{ id: 'a', metadata: { gone: null } }] }, 'put'),
    ).toHaveLength(1);
    expect(
      details(() =>
        parseContentBatch(
          { content: [{ id: 'a', url: 'http://x.test/a.png', metadata: { gone: null } }] },
          'post',
        ),
      )[0].field,
    ).toBe('metadata.gone');
  });

  it('rejects a body without a content array', () => {
    expect(details(() => parseContentBatch({ items: [] }, 'post'))[0].field).toBe('content');
  });

  it('accepts extension-less URLs and checks the last path segment only', () => {
    expect(imageUrlProblem('https://cdn.test/v1.2/image?id=3')).toBeUndefined();
    expect(imageUrlProblem('https://cdn.test/img/photo.webp?x=1')).toContain("'webp'");
    expect(imageUrlProblem('https://user:pw@cdn.test/a.png')).toContain('credentials');
  });

  it('merges PUT metadata: present keys override, null removes, others stay', () => {
    expect(mergeMetadata({ a: 1, b: 'x', c: true }, { b: 'y', c: null, d: [1] })).toEqual({
      a: 1,
      b: 'y',
      d: [1],
    });
  });

  it('parses delete bodies in both the contract and the Visii shape', () => {
    expect(checkDeleteIds(deleteIds({ ids: ['a', 'b', 'a'] }))).toEqual(['a', 'b']);
    expect(checkDeleteIds(deleteIds({ content: [{ id: 'a' }] }))).toEqual(['a']);
    expect(() => checkDeleteIds(Array.from({ length: 1001 }, (_, i) => `${i}`))).toThrow(
      /at most 1000/,
    );
    expect(() => checkDeleteIds(['ok', ''])).toThrow(/nothing was deleted/);
  });
});

describe('settings/fields validation', () => {
  it('normalises values to strings and counts * as one', () => {
    expect(parseEnabledFields({ sizes: [38, '39'], tags: ['*'] })).toEqual({
      sizes: ['38', '39'],
      tags: ['*'],
    });
  });
  it('enforces the 200-value limit across fields', () => {
    const many = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}`);
    expect(parseEnabledFields({ a: many(100, 'a'), b: many(100, 'b') })).toBeDefined();
    expect(() => parseEnabledFields({ a: many(100, 'a'), b: many(101, 'b') })).toThrow(
      /201 indexed values/,
    );
  });
  it('rejects * mixed with values, and empty lists', () => {
    expect(() => parseEnabledFields({ a: ['*', 'x'] })).toThrow();
    expect(() => parseEnabledFields({ a: [] })).toThrow();
  });
});
