/**
 * RFC 4180 CSV records assembled from physical lines: quoted fields may hold commas, doubled
 * quotes and line breaks, so one record can span several lines. Pure: no I/O.
 */
import { LineSplitter, type Line } from './lines';

/** A record (or why it is unreadable) and where it is: `line` first, `lastLine` last. */
export type CsvRecord = { line: number; lastLine: number; start: number; end: number } & (
  { ok: true; fields: string[] } | { ok: false; reason: string }
);

export class CsvAssembler {
  private fields: string[] = [];
  private field = '';
  private inQuotes = false;
  /** The current field started with a quote (and so may hold delimiters). */
  private quoted = false;
  /** The quoted field was closed; only a delimiter or the end of the record may follow. */
  private closed = false;
  private first: Line | undefined;
  private last: Line | undefined;
  private bytes = 0;

  constructor(private readonly maxRecordBytes: number) {}

  /** Feeds one physical line; returns a record when the line completes one. */
  push(line: Line): CsvRecord | undefined {
    if (!this.first) {
      if (line.text === '' && !line.tooLong) return undefined; // blank line between records
      this.first = line;
    } else this.field += '\n'; // the line break belongs to a quoted field
    this.last = line;
    this.bytes += line.end - line.start;
    if (line.tooLong || this.bytes > this.maxRecordBytes)
      return this.fail(line, `record longer than ${this.maxRecordBytes} bytes`);
    const t = line.text;
    for (let i = 0; i < t.length; i++) {
      const c = t[i];
      if (this.inQuotes) {
        if (c !== '"') this.field += c;
        else if (t[i + 1] === '"') {
          this.field += '"';
          i++;
        } else {
          this.inQuotes = false;
          this.closed = true;
        }
      } else if (c === ',') {
        this.endField();
      } else if (this.closed) {
        return this.fail(
          line,
          `unexpected character after a closing quote (field ${this.fields.length + 1})`,
        );
      } else if (c === '"' && this.field === '' && !this.quoted) {
        this.inQuotes = true;
        this.quoted = true;
      } else {
        this.field += c; // a quote inside an unquoted field is kept as it is
      }
    }
    if (this.inQuotes) return undefined; // the record goes on on the next line
    this.endField();
    return this.finish(line, { ok: true, fields: this.fields });
  }

  /** Ends the input: a record still open (an unclosed quote) is reported. */
  end(): CsvRecord | undefined {
    if (!this.first || !this.last) return undefined;
    return this.fail(this.last, `unclosed quoted field (opened on line ${this.first.no})`);
  }

  private endField(): void {
    this.fields.push(this.field);
    this.field = '';
    this.quoted = false;
    this.closed = false;
  }

  private fail(line: Line, reason: string): CsvRecord {
    return this.finish(line, { ok: false, reason });
  }

  private finish(
    line: Line,
    r: { ok: true; fields: string[] } | { ok: false; reason: string },
  ): CsvRecord {
    const first = this.first ?? line;
    const rec: CsvRecord = {
      ...r,
      line: first.no,
      lastLine: line.no,
      start: first.start,
      end: line.end,
    };
    this.fields = [];
    this.field = '';
    this.inQuotes = false;
    this.quoted = false;
    this.closed = false;
    this.first = undefined;
    this.last = undefined;
    this.bytes = 0;
    return rec;
  }
}

/** Parses a whole CSV text (tests, small inputs): every record, in order. */
export function parseCsvText(text: string, maxRecordBytes = 1 << 20): CsvRecord[] {
  const splitter = new LineSplitter(maxRecordBytes);
  const csv = new CsvAssembler(maxRecordBytes);
  const out: CsvRecord[] = [];
  for (const line of [...splitter.push(Buffer.from(text, 'utf8')), ...splitter.end()]) {
    const r = csv.push(line);
    if (r) out.push(r);
  }
  const last = csv.end();
  if (last) out.push(last);
  return out;
}
