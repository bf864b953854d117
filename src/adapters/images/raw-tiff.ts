/**
 * Uncompressed 8-bit pixels wrapped as a TIFF, the one container sharp reads that says what
 * the samples are: sharp's raw input is always taken as RGB(A), while a TIFF can mark them
 * CMYK, carry the original's ICC profile and its EXIF orientation, so the pipeline after the
 * decode (orientation, colour conversion, resize) is the one every other image goes through.
 */
export interface RawPixels {
  width: number;
  height: number;
  /** 1 grey, 3 RGB, 4 CMYK (0 = no ink) */
  channels: 1 | 3 | 4;
  data: Uint8Array;
}

const SHORT = 3;
const LONG = 4;
const UNDEFINED = 7;

/** TIFF photometric interpretations: BlackIsZero, RGB, Separated (CMYK). */
const PHOTOMETRIC = { 1: 1, 3: 2, 4: 5 } as const;

export function rawTiff(img: RawPixels, opts: { icc?: Uint8Array; orientation?: number }): Buffer {
  const n = img.channels;
  if (img.data.length !== img.width * img.height * n) throw new Error('pixel data of wrong size');
  // [tag, type, count, value or the bytes it points to]
  const entries: Array<[number, number, number, number | Uint8Array]> = [
    [256, LONG, 1, img.width],
    [257, LONG, 1, img.height],
    [258, SHORT, n, n === 1 ? 8 : shorts(Array<number>(n).fill(8))],
    [259, SHORT, 1, 1], // no compression
    [262, SHORT, 1, PHOTOMETRIC[n]],
    [273, LONG, 1, 0], // strip offset, set below
    ...(opts.orientation && opts.orientation !== 1
      ? [[274, SHORT, 1, opts.orientation] as [number, number, number, number]]
      : []),
    [277, SHORT, 1, n],
    [278, LONG, 1, img.height],
    [279, LONG, 1, img.data.length],
    [284, SHORT, 1, 1], // chunky
    ...(n === 4 ? [[332, SHORT, 1, 1] as [number, number, number, number]] : []), // InkSet CMYK
    ...(opts.icc?.length
      ? [[34675, UNDEFINED, opts.icc.length, opts.icc] as [number, number, number, Uint8Array]]
      : []),
  ];
  const ifdSize = 2 + entries.length * 12 + 4;
  let extra = 8 + ifdSize;
  const blobs: Array<{ at: number; bytes: Uint8Array }> = [];
  for (const e of entries) {
    if (typeof e[3] === 'number' || e[3].length <= 4) continue;
    blobs.push({ at: extra, bytes: e[3] });
    extra += e[3].length + (e[3].length & 1); // word-aligned, as TIFF asks
  }
  const dataAt = extra;
  const out = Buffer.alloc(dataAt + img.data.length);
  out.write('II', 0, 'latin1');
  out.writeUInt16LE(42, 2);
  out.writeUInt32LE(8, 4);
  out.writeUInt16LE(entries.length, 8);
  let blob = 0;
  entries.forEach(([tag, type, count, value], i) => {
    const at = 10 + i * 12;
    out.writeUInt16LE(tag, at);
    out.writeUInt16LE(type, at + 2);
    out.writeUInt32LE(count, at + 4);
    if (tag === 273) out.writeUInt32LE(dataAt, at + 8);
    // up to 4 bytes go in the entry itself, where a reader looks for them (TIFF 6.0, Value Offset)
    else if (typeof value !== 'number' && value.length <= 4) out.set(value, at + 8);
    else if (typeof value !== 'number') out.writeUInt32LE(blobs[blob++]!.at, at + 8);
    else if (type === SHORT && count === 1) out.writeUInt16LE(value, at + 8);
    else out.writeUInt32LE(value >>> 0, at + 8);
  });
  out.writeUInt32LE(0, 10 + entries.length * 12); // no next IFD
  for (const b of blobs) out.set(b.bytes, b.at);
  out.set(img.data, dataAt);
  return out;
}

function shorts(values: number[]): Uint8Array {
  const b = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => b.writeUInt16LE(v, i * 2));
  return b;
}
