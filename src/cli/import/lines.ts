/**
 * Splits a byte stream into lines and remembers where each one is in the file, so the import
 * can record "acknowledged up to byte N / line L" and resume there. Pure: no I/O.
 */

export interface Line {
  /** 1-based physical line number. */
  no: number;
  /** Byte offset of the line's first byte. */
  start: number;
  /** Byte offset just past the line's terminating `\n` (or the end of the input). */
  end: number;
  /** The line without its `\n` / `\r\n`; empty when `tooLong`. */
  text: string;
  /** The line held more than `maxLineBytes` bytes; its text was discarded, not buffered. */
  tooLong?: boolean;
}

const NL = 0x0a;
const CR = 0x0d;

export class LineSplitter {
  private parts: Buffer[] = [];
  private partBytes = 0;
  private overflow = false;
  private lineStart: number;
  private lineNo: number;
  private readonly decoder = new TextDecoder('utf-8');

  constructor(
    /** Lines longer than this are reported `tooLong` and never held in memory whole. */
    private readonly maxLineBytes: number,
    startOffset = 0,
    startLine = 1,
  ) {
    this.lineStart = startOffset;
    this.lineNo = startLine;
  }

  /** Feeds the next chunk; returns the lines it completed. */
  push(chunk: Buffer): Line[] {
    const out: Line[] = [];
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(NL, from);
      if (nl < 0) {
        this.keep(chunk.subarray(from));
        return out;
      }
      this.keep(chunk.subarray(from, nl + 1));
      out.push(this.emit());
      from = nl + 1;
    }
  }

  /** Ends the input; returns the last line when the input does not end with `\n`. */
  end(): Line[] {
    return this.partBytes > 0 || this.overflow ? [this.emit()] : [];
  }

  private keep(piece: Buffer): void {
    if (piece.length === 0) return;
    this.partBytes += piece.length;
    if (this.overflow) return;
    if (this.partBytes > this.maxLineBytes + 2) {
      this.overflow = true;
      this.parts = [];
      return;
    }
    this.parts.push(piece);
  }

  private emit(): Line {
    const start = this.lineStart;
    const end = start + this.partBytes;
    let text = '';
    const tooLong = this.overflow;
    if (!tooLong) {
      let buf = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
      let n = buf.length;
      if (n > 0 && buf[n - 1] === NL) n--;
      if (n > 0 && buf[n - 1] === CR) n--;
      buf = buf.subarray(0, n);
      text = this.decoder.decode(buf);
    }
    const line: Line = { no: this.lineNo, start, end, text, ...(tooLong ? { tooLong } : {}) };
    this.lineNo++;
    this.lineStart = end;
    this.parts = [];
    this.partBytes = 0;
    this.overflow = false;
    return line;
  }
}
