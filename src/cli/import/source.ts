/**
 * Streams the input file from a byte offset and yields one entry per record (JSON Lines or
 * CSV): memory holds one chunk and one record at a time, whatever the file's size.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Entry } from './batcher';
import { CsvAssembler, type CsvRecord } from './csv';
import { CsvItems, itemFromJsonLine } from './items';
import { LineSplitter, type Line } from './lines';
import type { FieldType } from './types';

export type Format = 'jsonl' | 'csv';

export function formatOf(file: string): Format | undefined {
  const ext = path.extname(file).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  if (ext === '.csv') return 'csv';
  return undefined;
}

export interface SourceOptions {
  file: string;
  format: Format;
  /** Byte offset and line number to start at (a resume); 0 and 1 for a fresh import. */
  start: number;
  line: number;
  types: Map<string, FieldType>;
  /** Longest line (JSON Lines) or record (CSV) read; longer ones are rejected unread. */
  maxRecordBytes: number;
  chunkBytes?: number;
}

const CHUNK = 1 << 20;

async function* lines(
  file: string,
  start: number,
  line: number,
  maxBytes: number,
  chunkBytes = CHUNK,
): AsyncGenerator<Line> {
  const splitter = new LineSplitter(maxBytes, start, line);
  const stream = fs.createReadStream(file, { start, highWaterMark: chunkBytes });
  try {
    for await (const chunk of stream) yield* splitter.push(chunk as Buffer);
    yield* splitter.end();
  } finally {
    stream.destroy();
  }
}

/** The first CSV record of the file (its header), read on its own when resuming past it. */
async function readCsvHeader(file: string, maxBytes: number): Promise<CsvRecord | undefined> {
  const csv = new CsvAssembler(maxBytes);
  for await (const l of lines(file, 0, 1, maxBytes, 64 * 1024)) {
    const r = csv.push(l);
    if (r) return r;
  }
  return csv.end();
}

function headerOf(r: CsvRecord | undefined, types: Map<string, FieldType>): CsvItems {
  if (!r) throw new Error('CSV file is empty: expected a header row with id and url columns');
  if (!r.ok) throw new Error(`CSV header (line ${r.line}): ${r.reason}`);
  return new CsvItems(r.fields, types);
}

const tooLong = (l: Line, max: number): Entry => ({
  line: l.no,
  start: l.start,
  end: l.end,
  nextLine: l.no + 1,
  reason: `line longer than ${max} bytes`,
});

/** Entries from `start` on; throws (fatal) when a CSV header is unusable. */
export async function* readEntries(o: SourceOptions): AsyncGenerator<Entry> {
  if (o.format === 'jsonl') {
    for await (const l of lines(o.file, o.start, o.line, o.maxRecordBytes, o.chunkBytes)) {
      if (l.tooLong) {
        yield tooLong(l, o.maxRecordBytes);
        continue;
      }
      if (l.text.trim() === '') continue;
      const span = { line: l.no, start: l.start, end: l.end, nextLine: l.no + 1 };
      const p = itemFromJsonLine(l.text, o.types);
      yield p.ok
        ? { ...span, item: p.item }
        : { ...span, reason: p.reason, ...(p.id !== undefined ? { id: p.id } : {}) };
    }
    return;
  }
  let items =
    o.start > 0 ? headerOf(await readCsvHeader(o.file, o.maxRecordBytes), o.types) : undefined;
  const csv = new CsvAssembler(o.maxRecordBytes);
  const toEntry = (r: CsvRecord): Entry | undefined => {
    if (!items) {
      items = headerOf(r, o.types);
      return undefined;
    }
    const span = { line: r.line, start: r.start, end: r.end, nextLine: r.lastLine + 1 };
    if (!r.ok) return { ...span, reason: `bad CSV row: ${r.reason}` };
    const p = items.map(r.fields);
    return p.ok
      ? { ...span, item: p.item }
      : { ...span, reason: p.reason, ...(p.id !== undefined ? { id: p.id } : {}) };
  };
  for await (const l of lines(o.file, o.start, o.line, o.maxRecordBytes, o.chunkBytes)) {
    const r = csv.push(l);
    const e = r && toEntry(r);
    if (e) yield e;
  }
  const r = csv.end();
  const e = r && toEntry(r);
  if (e) yield e;
  if (!items) headerOf(undefined, o.types);
}
