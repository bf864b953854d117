import { CsvAssembler, parseCsvText } from '../../src/cli/import/csv';
import { CsvItems } from '../../src/cli/import/items';
import { LineSplitter, type Line } from '../../src/cli/import/lines';

const fields = (text: string) =>
  parseCsvText(text).map((r) => (r.ok ? r.fields : { error: r.reason, line: r.line }));

describe('LineSplitter', () => {
  const text = 'a,1\r\nbé,2\n\nlast';
  const bytes = Buffer.from(text, 'utf8');

  it('gives each line its number and byte range, whatever the chunking', () => {
    const whole = new LineSplitter(100);
    const expected = [...whole.push(bytes), ...whole.end()];
    expect(expected.map((l) => [l.no, l.start, l.end, l.text])).toEqual([
      [1, 0, 5, 'a,1'],
      [2, 5, 11, 'bé,2'],
      [3, 11, 12, ''],
      [4, 12, 16, 'last'],
    ]);
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = new LineSplitter(100);
      const got: Line[] = [
        ...s.push(bytes.subarray(0, cut)),
        ...s.push(bytes.subarray(cut)),
        ...s.end(),
      ];
      expect(got).toEqual(expected);
    }
  });

  it('starts at a resume offset and line', () => {
    const s = new LineSplitter(100, 1000, 41);
    expect(s.push(Buffer.from('x\ny\n')).map((l) => [l.no, l.start, l.end])).toEqual([
      [41, 1000, 1002],
      [42, 1002, 1004],
    ]);
    expect(s.end()).toEqual([]);
  });

  it('reports an over-long line without holding it', () => {
    const s = new LineSplitter(10);
    const lines = [...s.push(Buffer.from(`short\n${'x'.repeat(50)}\nok\n`)), ...s.end()];
    expect(lines.map((l) => [l.no, l.text, !!l.tooLong, l.end - l.start])).toEqual([
      [1, 'short', false, 6],
      [2, '', true, 51],
      [3, 'ok', false, 3],
    ]);
  });
});

describe('CSV (RFC 4180)', () => {
  it('reads plain and quoted fields, commas and doubled quotes inside quotes', () => {
    expect(
      fields('id,url,name\n1,http://x/1.png,"Boots, brown"\n2,"http://x/2.png","say ""hi"""\n'),
    ).toEqual([
      ['id', 'url', 'name'],
      ['1', 'http://x/1.png', 'Boots, brown'],
      ['2', 'http://x/2.png', 'say "hi"'],
    ]);
  });

  it('keeps line breaks inside quoted fields and numbers records by their first line', () => {
    const recs = parseCsvText('id,text\n1,"line one\nline two\r\nline three"\n2,after\n');
    expect(recs.map((r) => [r.line, r.lastLine, r.ok && r.fields])).toEqual([
      [1, 1, ['id', 'text']],
      [2, 4, ['1', 'line one\nline two\nline three']],
      [5, 5, ['2', 'after']],
    ]);
    // the byte range of the multi-line record covers its three lines
    const r = recs[1];
    expect(r.end - r.start).toBe(Buffer.byteLength('1,"line one\nline two\r\nline three"\n'));
  });

  it('handles empty fields, empty quoted fields, CRLF, a missing final newline and blank lines', () => {
    expect(fields('a,b,c\r\n,,\r\n"",x,""\r\n\r\nlast,"q",\r\nend,1,2')).toEqual([
      ['a', 'b', 'c'],
      ['', '', ''],
      ['', 'x', ''],
      ['last', 'q', ''],
      ['end', '1', '2'],
    ]);
  });

  it('keeps a quote inside an unquoted field as it is', () => {
    expect(fields('5" screen,b\n')).toEqual([['5" screen', 'b']]);
  });

  it('rejects text after a closing quote and goes on with the next record', () => {
    expect(fields('a,b\n"x"y,2\nc,d\n')).toEqual([
      ['a', 'b'],
      { error: expect.stringContaining('after a closing quote'), line: 2 },
      ['c', 'd'],
    ]);
  });

  it('rejects a quoted field left open at the end of the input', () => {
    expect(fields('a,b\n1,"never closed\nmore\n')).toEqual([
      ['a', 'b'],
      { error: 'unclosed quoted field (opened on line 2)', line: 2 },
    ]);
  });

  it('rejects a record longer than the limit', () => {
    const csv = new CsvAssembler(20);
    const s = new LineSplitter(20);
    const out = [...s.push(Buffer.from(`a,b\n"${'x'.repeat(30)}",1\nc,d\n`)), ...s.end()].map((l) =>
      csv.push(l),
    );
    expect(out.map((r) => r && (r.ok ? r.fields : r.reason))).toEqual([
      ['a', 'b'],
      'record longer than 20 bytes',
      ['c', 'd'],
    ]);
  });
});

describe('CSV rows to items', () => {
  const types = new Map();

  it('needs id and url columns, unique names, and declared types that are columns', () => {
    expect(() => new CsvItems(['sku', 'image'], types)).toThrow(/no 'id' column; no 'url' column/);
    expect(() => new CsvItems(['id', 'url', 'a', 'a'], types)).toThrow(/repeated columns: a/);
    expect(() => new CsvItems(['id', 'url'], new Map([['price', 'number']]))).toThrow(
      /--types names 'price'/,
    );
  });

  it('maps a row with inferred types and drops empty cells', () => {
    const m = new CsvItems(['id', 'url', 'price', 'instock', 'name', 'zip', 'note'], types);
    expect(m.map(['sku-1', ' http://x/1.png ', '12.5', 'true', 'Boot', '007', ''])).toEqual({
      ok: true,
      item: {
        id: 'sku-1',
        url: 'http://x/1.png',
        metadata: { price: 12.5, instock: true, name: 'Boot', zip: '007' },
      },
    });
  });

  it('uses declared types and rejects cells that do not convert', () => {
    const m = new CsvItems(
      ['id', 'url', 'tags', 'code', 'sizes'],
      new Map([
        ['tags', 'string[]'],
        ['code', 'string'],
        ['sizes', 'number[]'],
      ] as const),
    );
    expect(m.map(['1', 'http://x/1.png', 'a| b |c', '42', '38|39.5'])).toEqual({
      ok: true,
      item: {
        id: '1',
        url: 'http://x/1.png',
        metadata: { tags: ['a', 'b', 'c'], code: '42', sizes: [38, 39.5] },
      },
    });
    expect(m.map(['2', 'http://x/2.png', 'a', '1', '38|big'])).toEqual({
      ok: false,
      id: '2',
      reason: "sizes: array element 'big' is not a number",
    });
  });

  it('rejects rows with the wrong number of fields or without id or url', () => {
    const m = new CsvItems(['id', 'url', 'a'], types);
    expect(m.map(['1', 'http://x/1.png'])).toEqual({
      ok: false,
      reason: 'row has 2 fields; the header has 3',
    });
    expect(m.map(['', 'http://x/1.png', ''])).toEqual({ ok: false, reason: 'missing id' });
    expect(m.map(['9', '', 'x'])).toEqual({ ok: false, reason: 'missing url', id: '9' });
  });

  it('keeps a column named __proto__ as an ordinary field', () => {
    const m = new CsvItems(['id', 'url', '__proto__'], types);
    const r = m.map(['1', 'http://x/1.png', 'x']);
    expect(r.ok && JSON.stringify(r.item.metadata)).toBe('{"__proto__":"x"}');
  });
});
