/**
 * A progressive JPEG read from its DC scans alone: each 8 × 8 block's mean, so an image an
 * eighth of the size in each direction, in a few MiB whatever the original's size.
 *
 * Why not sharp: libjpeg keeps every DCT coefficient of a progressive image until its last
 * scan, at whatever scale it decodes (8 bytes a pixel for CMYK: 310 MiB for the 40 MP the
 * contract allows), and no library decodes a progressive JPEG without that buffer. At 1/8 scale
 * libjpeg itself uses nothing but the DC coefficient of each block (jidctred.c, 1 × 1 IDCT), and
 * a progressive file sends every DC coefficient before any AC one, so reading those scans gives
 * the very samples libjpeg's 1/8-scale decode would, without holding the rest. The AC scans are
 * stepped over unread.
 *
 * The samples are returned as stored (YCbCr converted to RGB as libjpeg does; CMYK as libvips
 * reads it, Adobe's inverted values turned back), for sharp to take on from there (colour
 * profile, orientation, resize).
 */

import { LIMITS } from '../../domain/limits';

export interface DcImage {
  /** Columns of blocks: ceil(width / 8) of the original. */
  width: number;
  height: number;
  /** 1 grey, 3 RGB, 4 CMYK (0 = no ink). */
  channels: 1 | 3 | 4;
  data: Uint8Array;
}

/** The file is valid JPEG this reader does not handle (baseline, lossless, arithmetic, 12-bit). */
export class DcUnsupported extends Error {}

interface Component {
  id: number;
  h: number;
  v: number;
  tq: number;
  /** Blocks per line and per column in the padded MCU grid. */
  bpl: number;
  bpc: number;
  coef: Int16Array;
  /** DC quantiser, latched at the component's first DC scan (as libjpeg does). */
  q0: number;
  seenDc: boolean;
  /** The bit its last DC scan ended at (Al): a refinement scan must go on from it. */
  dcAl: number;
}

interface Huffman {
  maxcode: Int32Array;
  valptr: Int32Array;
  mincode: Int32Array;
  values: Uint8Array;
}

/** How long a slice of decoding runs before the event loop gets a turn. */
const SLICE_MS = 4;

/**
 * Decodes the DC scans of a progressive JPEG; yields to the event loop between slices.
 * A frame above `maxPixels` is refused before anything is allocated: the caller reserves memory
 * from libjpeg's reading of the header, and this keeps the reader within the largest such
 * reservation whatever its own reading finds.
 */
export async function decodeJpegDc(
  bytes: Uint8Array,
  maxPixels = LIMITS.imageMaxPixels,
): Promise<DcImage> {
  const r = new Reader(bytes);
  if (r.u16() !== 0xffd8) throw new Error('not a JPEG (no SOI marker)');
  const quant: Array<Uint16Array | undefined> = [];
  const dcTables: Array<Huffman | undefined> = [];
  let restartInterval = 0;
  let adobe: number | undefined;
  let frame: Frame | undefined;
  for (;;) {
    const marker = r.marker();
    if (marker === 0xd9) break; // EOI
    // A stray RST between segments, or TEM: markers without a length, as libjpeg reads them
    // (taking TEM's next two bytes as a length would skip to segments libjpeg never reads).
    if ((marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) continue;
    const len = r.u16();
    if (len < 2) throw new Error(`segment ${hex(marker)} of length ${len}`);
    const end = r.pos + len - 2;
    if (end > bytes.length) throw new Error('truncated segment');
    if (marker === 0xc2) {
      if (frame) throw new Error('a second frame header');
      frame = readFrame(r, maxPixels);
    } else if (OTHER_FRAMES.has(marker)) {
      throw new DcUnsupported(`JPEG frame ${hex(marker)} is not progressive Huffman`);
    } else if (marker === 0xc4) {
      readHuffman(r, end, dcTables);
    } else if (marker === 0xdb) {
      readQuant(r, end, quant);
    } else if (marker === 0xdd) {
      restartInterval = r.u16();
    } else if (marker === 0xee && len >= 14 && r.ascii(5) === 'Adobe') {
      // after "Adobe", version, flags0 and flags1: the colour transform
      adobe = bytes[r.pos + 11]!;
    } else if (marker === 0xda) {
      if (!frame) throw new Error('a scan before the frame header');
      const header = bytes.subarray(r.pos, end);
      r.pos = await scan(bytes, end, header, frame, quant, dcTables, restartInterval);
      continue;
    }
    r.pos = end;
  }
  if (!frame) throw new Error('no frame header');
  const missing = frame.comps.find((c) => !c.seenDc);
  if (missing) throw new Error(`component ${missing.id} has no DC scan`);
  return render(frame, adobe);
}

/** Start-of-frame markers of every other kind: baseline, extended, lossless, arithmetic. */
const OTHER_FRAMES = new Set([
  0xc0, 0xc1, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf,
]);

function hex(m: number): string {
  return `0xFF${m.toString(16).toUpperCase().padStart(2, '0')}`;
}

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  u8(): number {
    if (this.pos >= this.b.length) throw new Error('truncated JPEG');
    return this.b[this.pos++]!;
  }
  u16(): number {
    return (this.u8() << 8) | this.u8();
  }
  ascii(n: number): string {
    return String.fromCharCode(...this.b.subarray(this.pos, this.pos + n));
  }
  /**
   * The next marker's code, after any fill bytes. Anything else in its place is refused, FF00
   * included: libjpeg skips such bytes to the next marker, so reading FF00 as a segment with a
   * length would walk to other segments than libjpeg's, and to another frame header.
   */
  marker(): number {
    const at = this.pos;
    if (this.u8() !== 0xff) throw new Error(`expected a marker at byte ${at}`);
    let m = this.u8();
    while (m === 0xff) m = this.u8();
    if (m === 0) throw new Error(`expected a marker at byte ${at}, found FF00`);
    return m;
  }
}

interface Frame {
  width: number;
  height: number;
  comps: Component[];
  hmax: number;
  vmax: number;
}

function readFrame(r: Reader, maxPixels: number): Frame {
  const precision = r.u8();
  if (precision !== 8) throw new DcUnsupported(`${precision}-bit samples`);
  const height = r.u16();
  const width = r.u16();
  const n = r.u8();
  if (!width || !height) throw new DcUnsupported('no height in the frame header (DNL)');
  if (width * height > maxPixels)
    throw new Error(`frame of ${width}×${height} is above ${maxPixels} pixels`);
  if (n !== 1 && n !== 3 && n !== 4) throw new DcUnsupported(`${n} components`);
  const raw: Array<{ id: number; h: number; v: number; tq: number }> = [];
  for (let i = 0; i < n; i++) {
    const id = r.u8();
    const hv = r.u8();
    const tq = r.u8();
    const h = hv >> 4;
    const v = hv & 15;
    if (h < 1 || h > 4 || v < 1 || v > 4 || tq > 3) throw new Error('bad component in frame');
    raw.push({ id, h, v, tq });
  }
  const hmax = Math.max(...raw.map((c) => c.h));
  const vmax = Math.max(...raw.map((c) => c.v));
  const mcusX = Math.ceil(width / (8 * hmax));
  const mcusY = Math.ceil(height / (8 * vmax));
  const comps = raw.map((c) => {
    const bpl = mcusX * c.h;
    const bpc = mcusY * c.v;
    return { ...c, bpl, bpc, coef: new Int16Array(bpl * bpc), q0: 0, seenDc: false, dcAl: 0 };
  });
  return { width, height, comps, hmax, vmax };
}

function readQuant(r: Reader, end: number, quant: Array<Uint16Array | undefined>): void {
  while (r.pos < end) {
    const pt = r.u8();
    const precision = pt >> 4;
    const id = pt & 15;
    if (id > 3) throw new Error('bad quantisation table id');
    const table = new Uint16Array(64);
    for (let i = 0; i < 64; i++) table[i] = precision ? r.u16() : r.u8();
    quant[id] = table;
  }
}

/** Keeps the DC tables (class 0); AC tables are read past. */
function readHuffman(r: Reader, end: number, dc: Array<Huffman | undefined>): void {
  while (r.pos < end) {
    const tc = r.u8();
    const cls = tc >> 4;
    const id = tc & 15;
    if (cls > 1 || id > 3) throw new Error('bad Huffman table id');
    const counts: number[] = [];
    for (let i = 0; i < 16; i++) counts.push(r.u8());
    const total = counts.reduce((a, b) => a + b, 0);
    if (total > 256) throw new Error('bad Huffman table');
    const values = r.b.slice(r.pos, r.pos + total);
    r.pos += total;
    if (r.pos > end) throw new Error('truncated Huffman table');
    if (cls === 0) dc[id] = huffman(counts, values);
  }
}

/** Canonical code tables (ITU T.81 Annex C/F.2.2.3): per length the first code and its value. */
function huffman(counts: number[], values: Uint8Array): Huffman {
  const maxcode = new Int32Array(18).fill(-1);
  const valptr = new Int32Array(17);
  const mincode = new Int32Array(17);
  let code = 0;
  let k = 0;
  for (let len = 1; len <= 16; len++) {
    const n = counts[len - 1]!;
    if (n) {
      valptr[len] = k;
      mincode[len] = code;
      code += n;
      k += n;
      maxcode[len] = code - 1;
    }
    code <<= 1;
  }
  return { maxcode, valptr, mincode, values };
}

/**
 * Entropy-coded bits, 0xFF00 unstuffed; a marker ends them. A scan that needs bits past it was
 * cut short and is refused: libjpeg reads zeros on (with a warning), but then a scan of a few
 * bytes would cost a pass over every block of the frame, up to 40 MP, and a file could hold
 * thousands. Refused, a scan costs at most eight blocks a byte.
 */
class Bits {
  private acc = 0;
  private n = 0;
  constructor(
    private readonly b: Uint8Array,
    public pos: number,
  ) {}

  bit(): number {
    if (this.n === 0) {
      const byte = this.b[this.pos];
      if (byte === undefined || (byte === 0xff && this.b[this.pos + 1] !== 0))
        throw new Error('a DC scan cut short');
      this.pos += byte === 0xff ? 2 : 1;
      this.acc = byte;
      this.n = 8;
    }
    this.n--;
    return (this.acc >> this.n) & 1;
  }

  bits(count: number): number {
    let v = 0;
    for (let i = 0; i < count; i++) v = (v << 1) | this.bit();
    return v;
  }

  decode(t: Huffman): number {
    let code = 0;
    for (let len = 1; len <= 16; len++) {
      code = (code << 1) | this.bit();
      if (code <= t.maxcode[len]!) return t.values[t.valptr[len]! + code - t.mincode[len]!]!;
    }
    throw new Error('bad Huffman code in a DC scan');
  }

  /** Past the restart marker that must follow; the bit buffer starts afresh. */
  restart(): void {
    this.n = 0;
    const at = nextMarker(this.b, this.pos);
    const m = this.b[at + 1];
    if (m === undefined || m < 0xd0 || m > 0xd7) throw new Error('missing restart marker');
    this.pos = at + 2;
  }
}

/** Offset of the next marker (0xFF then a byte that is neither 0x00 nor another 0xFF). */
function nextMarker(b: Uint8Array, from: number): number {
  let i = from;
  for (;;) {
    i = b.indexOf(0xff, i);
    if (i < 0 || i + 1 >= b.length) throw new Error('truncated JPEG (no marker after a scan)');
    const m = b[i + 1]!;
    if (m !== 0 && m !== 0xff) return i;
    i += 1;
  }
}

/** Offset of the next marker that ends a scan (restart markers belong to it). */
function scanEnd(b: Uint8Array, from: number): number {
  let i = from;
  for (;;) {
    i = nextMarker(b, i);
    const m = b[i + 1]!;
    if (m < 0xd0 || m > 0xd7) return i;
    i += 2;
  }
}

/** Reads one scan starting at `start`; returns the offset of the marker that ends it. */
async function scan(
  b: Uint8Array,
  start: number,
  header: Uint8Array,
  frame: Frame,
  quant: Array<Uint16Array | undefined>,
  dcTables: Array<Huffman | undefined>,
  restartInterval: number,
): Promise<number> {
  const h = new Reader(header);
  const ns = h.u8();
  if (ns < 1 || ns > 4) throw new Error('bad scan header');
  const comps: Array<{ c: Component; td: number }> = [];
  for (let i = 0; i < ns; i++) {
    const id = h.u8();
    const td = h.u8() >> 4;
    const c = frame.comps.find((x) => x.id === id);
    if (!c) throw new Error(`scan names unknown component ${id}`);
    comps.push({ c, td });
  }
  const ss = h.u8();
  const se = h.u8();
  const ahal = h.u8();
  const ah = ahal >> 4;
  const al = ahal & 15;
  // AC scans hold nothing this reader needs: step over them to the next marker.
  if (ss !== 0) return scanEnd(b, start);
  // libjpeg refuses these outright (jdphuff.c, JERR_BAD_PROGRESSION).
  if (se !== 0 || al > 13 || (ah !== 0 && al !== ah - 1))
    throw new Error('bad successive approximation in a DC scan');
  // Each DC scan decodes every block of its components, however few bytes it has (a scan without
  // data reads zeros), so scans beyond the progression T.81 G.1.1.1 allows (one first scan, then
  // one bit per refinement) are refused: a few bytes each would otherwise cost a decode each.
  for (const { c, td } of comps) {
    if (ah === 0) {
      const q = quant[c.tq];
      if (!q) throw new Error(`no quantisation table ${c.tq}`);
      if (!dcTables[td]) throw new Error(`no DC Huffman table ${td}`);
      if (c.seenDc) throw new Error(`a second DC scan of component ${c.id}`);
      c.q0 = q[0]!;
      c.seenDc = true;
    } else if (!c.seenDc || c.dcAl !== ah)
      throw new Error(`a DC refinement of component ${c.id} out of sequence`);
    c.dcAl = al;
  }
  const bits = new Bits(b, start);
  const pred = new Int32Array(ns);
  const block = (c: Component, td: number, k: number, index: number): void => {
    if (ah === 0) {
      const t = bits.decode(dcTables[td]!);
      if (t > 11) throw new Error('bad DC difference size');
      let diff = t ? bits.bits(t) : 0;
      if (t && diff < 1 << (t - 1)) diff -= (1 << t) - 1;
      pred[k] = pred[k]! + diff;
      c.coef[index] = pred[k]! << al;
    } else if (bits.bit()) c.coef[index] = c.coef[index]! | (1 << al);
  };
  let mcu = 0;
  const restartDue = (): void => {
    if (restartInterval && mcu > 0 && mcu % restartInterval === 0) {
      bits.restart();
      pred.fill(0);
    }
  };
  let sliceStart = Date.now();
  const breathe = async (): Promise<void> => {
    if (Date.now() - sliceStart < SLICE_MS) return;
    await new Promise((go) => setImmediate(go));
    sliceStart = Date.now();
  };
  if (ns === 1) {
    // A scan of one component: its own blocks in raster order, one block an MCU.
    const { c, td } = comps[0]!;
    const cols = Math.ceil(Math.ceil((frame.width * c.h) / frame.hmax) / 8);
    const rows = Math.ceil(Math.ceil((frame.height * c.v) / frame.vmax) / 8);
    for (let y = 0; y < rows; y++) {
      for (let x = 0; x < cols; x++, mcu++) {
        restartDue();
        block(c, td, 0, y * c.bpl + x);
      }
      await breathe();
    }
  } else {
    const mcusX = Math.ceil(frame.width / (8 * frame.hmax));
    const mcusY = Math.ceil(frame.height / (8 * frame.vmax));
    for (let my = 0; my < mcusY; my++) {
      for (let mx = 0; mx < mcusX; mx++, mcu++) {
        restartDue();
        comps.forEach(({ c, td }, k) => {
          for (let by = 0; by < c.v; by++)
            for (let bx = 0; bx < c.h; bx++)
              block(c, td, k, (my * c.v + by) * c.bpl + mx * c.h + bx);
        });
      }
      await breathe();
    }
  }
  return scanEnd(b, bits.pos);
}

const clamp = (v: number): number => (v < 0 ? 0 : v > 255 ? 255 : v);

/** Block means as samples (libjpeg's 1 × 1 IDCT), components brought to one grid and colour. */
function render(frame: Frame, adobe: number | undefined): DcImage {
  const width = Math.ceil(frame.width / 8);
  const height = Math.ceil(frame.height / 8);
  const n = frame.comps.length;
  const planes = frame.comps.map((c) => {
    const cols = Math.ceil(Math.ceil((frame.width * c.h) / frame.hmax) / 8);
    const rows = Math.ceil(Math.ceil((frame.height * c.v) / frame.vmax) / 8);
    const own = new Uint8Array(cols * rows);
    for (let y = 0; y < rows; y++)
      for (let x = 0; x < cols; x++)
        own[y * cols + x] = clamp(((c.coef[y * c.bpl + x]! * c.q0 + 4) >> 3) + 128);
    if (cols === width && rows === height) return own;
    // A subsampled component (chroma of 4:2:0) between its block centres, as libjpeg's
    // fancy upsampling does: a block edge would otherwise show where colours meet.
    const plane = new Uint8Array(width * height);
    const at = (o: number, scale: number, max: number) => {
      const s = Math.min(Math.max((o + 0.5) * scale - 0.5, 0), max - 1);
      const i = Math.floor(s);
      return { i, j: Math.min(i + 1, max - 1), f: s - i };
    };
    for (let y = 0; y < height; y++) {
      const v = at(y, c.v / frame.vmax, rows);
      for (let x = 0; x < width; x++) {
        const h = at(x, c.h / frame.hmax, cols);
        const top = own[v.i * cols + h.i]! * (1 - h.f) + own[v.i * cols + h.j]! * h.f;
        const bottom = own[v.j * cols + h.i]! * (1 - h.f) + own[v.j * cols + h.j]! * h.f;
        plane[y * width + x] = Math.round(top * (1 - v.f) + bottom * v.f);
      }
    }
    return plane;
  });
  if (n === 1) return { width, height, channels: 1, data: planes[0]! };
  const ids = frame.comps.map((c) => c.id);
  // libjpeg's colour guesses (jdapimin.c default_decompress_parms).
  const ycc =
    n === 3
      ? adobe !== undefined
        ? adobe !== 0
        : !(ids[0] === 0x52 && ids[1] === 0x47 && ids[2] === 0x42)
      : adobe === 2;
  const out = new Uint8Array(width * height * n);
  for (let i = 0, o = 0; i < width * height; i++, o += n) {
    let a = planes[0]![i]!;
    let b = planes[1]![i]!;
    let c = planes[2]![i]!;
    if (ycc) {
      const cb = b - 128;
      const cr = c - 128;
      const y = a;
      a = clamp(Math.round(y + 1.402 * cr));
      b = clamp(Math.round(y - 0.344136 * cb - 0.714136 * cr));
      c = clamp(Math.round(y + 1.772 * cb));
      // libjpeg's YCCK output is CMYK as Adobe stores it, inverted.
      if (n === 4) [a, b, c] = [255 - a, 255 - b, 255 - c];
    }
    if (n === 3) {
      out[o] = a;
      out[o + 1] = b;
      out[o + 2] = c;
    } else {
      // Adobe (Photoshop) writes CMYK inverted; libvips turns it back when the marker is there.
      const k = planes[3]![i]!;
      const inv = adobe !== undefined;
      out[o] = inv ? 255 - a : a;
      out[o + 1] = inv ? 255 - b : b;
      out[o + 2] = inv ? 255 - c : c;
      out[o + 3] = inv ? 255 - k : k;
    }
  }
  return { width, height, channels: n as 3 | 4, data: out };
}
