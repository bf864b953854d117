/**
 * Groups parsed lines into POST content requests whose body stays within the byte limit and
 * the item cap. A batch also covers the rejected lines between its items, so acknowledging a
 * batch acknowledges a contiguous byte range of the input. Pure.
 */
import type { ContentItem } from './items';

/** Where a record is in the input: first line, byte range, and the line after it. */
interface Span {
  line: number;
  start: number;
  end: number;
  nextLine: number;
}

/** One input record, parsed or rejected. */
export type Entry = Span & ({ item: ContentItem } | { reason: string; id?: string });

export interface Rejection {
  line: number;
  id?: string;
  field?: string;
  reason: string;
  /** Who refused it: this tool while reading, or the server. */
  by: 'local' | 'server';
}

export interface BatchItem {
  line: number;
  id: string;
  /** The item serialised as it is sent. */
  json: string;
  bytes: number;
}

export interface Batch {
  seq: number;
  /** Byte range of the input this batch covers: [start, end). */
  start: number;
  end: number;
  /** First line after this batch (where a resume starts once it is acknowledged). */
  nextLine: number;
  items: BatchItem[];
  rejected: Rejection[];
}

const BODY_PREFIX = '{"content":[';
const BODY_SUFFIX = ']}';
const ENVELOPE_BYTES = Buffer.byteLength(BODY_PREFIX) + Buffer.byteLength(BODY_SUFFIX);

/** Body bytes of a request holding items of these sizes. */
export const bodyBytes = (itemBytes: number[]): number =>
  ENVELOPE_BYTES + itemBytes.reduce((a, b) => a + b, 0) + Math.max(0, itemBytes.length - 1);

export const requestBody = (items: BatchItem[]): string =>
  BODY_PREFIX + items.map((i) => i.json).join(',') + BODY_SUFFIX;

export interface BatchLimits {
  maxBytes: number;
  maxItems: number;
}

export class Batcher {
  private seq = 0;
  private current: Batch;
  private bytes = ENVELOPE_BYTES;

  constructor(
    private readonly limits: BatchLimits,
    start: number,
    line: number,
  ) {
    this.current = this.fresh(start, line);
  }

  /** Adds one entry; returns the batch it closed, if adding it closed one. */
  add(e: Entry): Batch | undefined {
    let closed: Batch | undefined;
    if ('item' in e) {
      const json = JSON.stringify(e.item);
      const bytes = Buffer.byteLength(json);
      if (ENVELOPE_BYTES + bytes > this.limits.maxBytes) {
        this.reject(e, {
          line: e.line,
          id: e.item.id,
          reason: `item is ${bytes} bytes as JSON; a request body holds at most ${this.limits.maxBytes}`,
          by: 'local',
        });
        return undefined;
      }
      const sep = this.current.items.length > 0 ? 1 : 0;
      if (
        this.current.items.length >= this.limits.maxItems ||
        this.bytes + sep + bytes > this.limits.maxBytes
      ) {
        closed = this.current;
        this.current = this.fresh(closed.end, closed.nextLine);
      }
      this.bytes += (this.current.items.length > 0 ? 1 : 0) + bytes;
      this.current.items.push({ line: e.line, id: e.item.id, json, bytes });
      this.cover(e);
    } else {
      this.reject(e, {
        line: e.line,
        ...(e.id !== undefined ? { id: e.id } : {}),
        reason: e.reason,
        by: 'local',
      });
    }
    return closed;
  }

  /** Ends the input: the last batch, if it covers anything. */
  flush(): Batch | undefined {
    const b = this.current;
    if (b.items.length === 0 && b.rejected.length === 0 && b.end === b.start) return undefined;
    this.current = this.fresh(b.end, b.nextLine);
    return b;
  }

  /**
   * Extends the current batch over bytes that hold no record (blank lines), so they are
   * acknowledged with it.
   */
  skip(end: number, nextLine: number): void {
    this.current.end = end;
    this.current.nextLine = nextLine;
  }

  private reject(e: Entry, r: Rejection): void {
    this.current.rejected.push(r);
    this.cover(e);
  }

  private cover(e: Entry): void {
    this.current.end = e.end;
    this.current.nextLine = e.nextLine;
  }

  private fresh(start: number, line: number): Batch {
    this.bytes = ENVELOPE_BYTES;
    return { seq: this.seq++, start, end: start, nextLine: line, items: [], rejected: [] };
  }
}
