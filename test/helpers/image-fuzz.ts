/**
 * Fuzzing of the image code that reads untrusted bytes: the progressive JPEG DC reader
 * (jpeg-dc.ts) and the TIFF hand-off (raw-tiff.ts writes the DC samples as a TIFF, which
 * libvips's TIFF reader then reads with the analyzer's options).
 *
 * Every input is derived from (seed, index) alone, so a finding names both and `mutantAt`
 * rebuilds it: `FUZZ_SEED=<seed> FUZZ_ONLY=<index>` reruns that one input (see
 * test/adapters/image-fuzz.test.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp, { type Metadata } from 'sharp';
import { dcFootprint, type Header } from '../../src/adapters/images/decode-budget';
import { DcUnsupported, decodeJpegDc, type DcImage } from '../../src/adapters/images/jpeg-dc';
import { rawTiff } from '../../src/adapters/images/raw-tiff';
import { LIMITS } from '../../src/domain/limits';
import { scene } from './test-scene';

// ---------------------------------------------------------------------------------------------
// Random numbers

/** sfc32, seeded through splitmix32: small, fast, and the same sequence on every machine. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(...words: number[]) {
    let s = 0x9e3779b9;
    const mix = (): number => {
      s = (s + 0x9e3779b9) | 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    for (const w of words) s = (s ^ Math.imul(w >>> 0, 0x27d4eb2d)) | 0;
    this.#a = mix();
    this.#b = mix();
    this.#c = mix();
    this.#d = mix();
    for (let i = 0; i < 12; i++) this.u32();
  }

  u32(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return n <= 1 ? 0 : Math.floor((this.u32() / 2 ** 32) * n);
  }

  chance(p: number): boolean {
    return this.u32() / 2 ** 32 < p;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.below(xs.length)]!;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const w = this.u32();
      for (let k = 0; k < 4 && i + k < n; k++) out[i + k] = (w >>> (8 * k)) & 255;
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Mutators

/** Takes the input and the seed files; returns the mutated input (a new array or the same). */
export type Mutator = (rng: Rng, b: Uint8Array, seeds: readonly Uint8Array[]) => Uint8Array;

const BYTES = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe];
const WORDS = [0, 1, 2, 3, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xfffe, 0xffff];
const LONGS = [...WORDS, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];
/** Inputs grow by duplication and insertion; past this they are cut back, to keep runs fast. */
const MAX_INPUT = 256 * 1024;

/** A copy: `slice()` of a Buffer (the seeds are Buffers) is a view, and would let a mutation write into its seed. */
const copy = (b: Uint8Array): Uint8Array => new Uint8Array(b);

const cat = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

function writeUint(b: Uint8Array, at: number, value: number, size: 1 | 2 | 4, le: boolean): void {
  for (let k = 0; k < size && at + k < b.length; k++) {
    const shift = 8 * (le ? k : size - 1 - k);
    b[at + k] = Math.floor(value / 2 ** shift) & 255;
  }
}

function readUint(b: Uint8Array, at: number, size: 2 | 4, le: boolean): number {
  let v = 0;
  for (let k = 0; k < size; k++) v += (b[at + k] ?? 0) * 2 ** (8 * (le ? k : size - 1 - k));
  return v;
}

/** A random chunk [at, at + len) of b, mostly short. */
function chunk(rng: Rng, b: Uint8Array): [number, number] {
  const at = rng.below(b.length);
  const len = 1 + rng.below(Math.min(b.length - at, rng.chance(0.8) ? 32 : 4096));
  return [at, len];
}

/** Mutators that know nothing of the format. */
const byteMutators: Record<string, Mutator> = {
  bitFlip(rng, b) {
    const out = copy(b);
    for (let n = 1 + rng.below(8); n > 0; n--) out[rng.below(out.length)] ^= 1 << rng.below(8);
    return out;
  },
  interestingByte(rng, b) {
    const out = copy(b);
    for (let n = 1 + rng.below(4); n > 0; n--) out[rng.below(out.length)] = rng.pick(BYTES);
    return out;
  },
  interestingWord(rng, b) {
    const out = copy(b);
    const size = rng.pick([2, 4] as const);
    writeUint(
      out,
      rng.below(out.length),
      rng.pick(size === 2 ? WORDS : LONGS),
      size,
      rng.chance(0.5),
    );
    return out;
  },
  duplicateChunk(rng, b) {
    const [at, len] = chunk(rng, b);
    const to = rng.below(b.length + 1);
    return cat(b.subarray(0, to), b.subarray(at, at + len), b.subarray(to));
  },
  deleteChunk(rng, b) {
    const [at, len] = chunk(rng, b);
    return cat(b.subarray(0, at), b.subarray(at + len));
  },
  insertChunk(rng, b) {
    const to = rng.below(b.length + 1);
    const len = 1 + rng.below(rng.chance(0.8) ? 16 : 1024);
    const fill = rng.chance(0.5) ? rng.bytes(len) : new Uint8Array(len).fill(rng.pick(BYTES));
    return cat(b.subarray(0, to), fill, b.subarray(to));
  },
  truncate(rng, b) {
    return b.subarray(0, rng.below(b.length));
  },
  splice(rng, b, seeds) {
    const other = rng.pick(seeds);
    return cat(b.subarray(0, rng.below(b.length + 1)), other.subarray(rng.below(other.length)));
  },
};

// JPEG ------------------------------------------------------------------------------------------

export interface JpegSegment {
  marker: number;
  /** Offset of the marker's FF; its length field (if any) is at at + 2. */
  at: number;
  /** End of the segment; a scan's entropy-coded data belongs to it. */
  end: number;
}

const standalone = (m: number): boolean => (m >= 0xd0 && m <= 0xd9) || m === 0x01 || m === 0;

/** The segments after SOI, as far as they follow one another; a tolerant walk, for mutators. */
export function jpegSegments(b: Uint8Array): JpegSegment[] {
  const out: JpegSegment[] = [];
  let i = 2;
  while (i + 1 < b.length && b[i] === 0xff) {
    let j = i + 1;
    while (j < b.length && b[j] === 0xff) j++;
    if (j >= b.length) break;
    const m = b[j]!;
    if (standalone(m)) {
      out.push({ marker: m, at: j - 1, end: j + 1 });
      if (m === 0xd9) break;
      i = j + 1;
      continue;
    }
    let end = j + 1 + readUint(b, j + 1, 2, false);
    if (end > b.length) break;
    if (m === 0xda) {
      while (end + 1 < b.length) {
        const next = b[end + 1]!;
        if (b[end] === 0xff && next !== 0 && next !== 0xff && (next < 0xd0 || next > 0xd7)) break;
        end++;
      }
    }
    out.push({ marker: m, at: j - 1, end: Math.min(end, b.length) });
    i = end;
  }
  return out;
}

/** A segment of b with a length field, or undefined when the walk finds none. */
function lengthSegment(rng: Rng, b: Uint8Array): JpegSegment | undefined {
  const segs = jpegSegments(b).filter((s) => !standalone(s.marker));
  return segs.length ? rng.pick(segs) : undefined;
}

/** Offsets between segments, where a segment can go. */
function boundaries(b: Uint8Array): number[] {
  return [2, ...jpegSegments(b).map((s) => s.end)];
}

const jpegMutators: Record<string, Mutator> = {
  ...byteMutators,
  /** A segment's length set to a value near it or at an edge. */
  segmentLength(rng, b) {
    const s = lengthSegment(rng, b);
    if (!s) return byteMutators.interestingWord!(rng, b, []);
    const len = readUint(b, s.at + 2, 2, false);
    const out = copy(b);
    const values = [0, 1, 2, 3, len - 1, len + 1, len - 2, len + 2, len * 2, 0xffff];
    writeUint(out, s.at + 2, rng.chance(0.8) ? rng.pick(values) : rng.below(0x10000), 2, false);
    return out;
  },
  /**
   * A byte of a segment's header set to an edge or at random: frame size, component count,
   * sampling factors and table ids; Huffman counts; scan Ss, Se, Ah, Al; restart interval.
   */
  segmentField(rng, b) {
    const s = lengthSegment(rng, b);
    if (!s) return byteMutators.interestingByte!(rng, b, []);
    const headerEnd = Math.min(s.at + 2 + readUint(b, s.at + 2, 2, false), s.end);
    const from = s.at + 4;
    if (headerEnd <= from) return b;
    const out = copy(b);
    const at = from + rng.below(Math.min(headerEnd - from, 64));
    out[at] = rng.chance(0.5) ? rng.pick([...BYTES, 0x11, 0x22, 0x44, 0x0d, 0x10]) : rng.below(256);
    return out;
  },
  segmentDuplicate(rng, b) {
    const segs = jpegSegments(b);
    if (!segs.length) return b;
    const s = rng.pick(segs);
    const to = rng.pick(boundaries(b));
    return cat(b.subarray(0, to), b.subarray(s.at, s.end), b.subarray(to));
  },
  segmentDelete(rng, b) {
    const segs = jpegSegments(b);
    if (!segs.length) return b;
    const s = rng.pick(segs);
    return cat(b.subarray(0, s.at), b.subarray(s.end));
  },
  /** A segment of another seed (its tables, frame or a scan) put in among this one's. */
  foreignSegment(rng, b, seeds) {
    const other = rng.pick(seeds);
    const segs = jpegSegments(other);
    if (!segs.length) return b;
    const s = rng.pick(segs);
    const to = rng.pick(boundaries(b));
    return cat(b.subarray(0, to), other.subarray(s.at, s.end), b.subarray(to));
  },
  /** The frame's size set to edges: a block's, the DC reader's threshold, the pixel limit's. */
  frameSize(rng, b) {
    const sof = jpegSegments(b).find(
      (s) => s.marker >= 0xc0 && s.marker <= 0xcf && s.marker !== 0xc4,
    );
    if (!sof) return b;
    const out = copy(b);
    const sizes = [0, 1, 7, 8, 9, 16, 17, 255, 1792, 6300, 6324, 8192, 65535, 610, 61];
    for (const at of [sof.at + 5, sof.at + 7])
      if (rng.chance(0.7))
        writeUint(out, at, rng.chance(0.8) ? rng.pick(sizes) : rng.below(0x10000), 2, false);
    return out;
  },
  /** A scan's header put in again without its data, or a scan's data dropped. */
  emptyScan(rng, b) {
    const scans = jpegSegments(b).filter((s) => s.marker === 0xda);
    if (!scans.length) return b;
    const s = rng.pick(scans);
    const header = b.subarray(s.at, Math.min(s.at + 2 + readUint(b, s.at + 2, 2, false), s.end));
    if (rng.chance(0.5)) return cat(b.subarray(0, s.at), header, b.subarray(s.end));
    const copies = Array.from({ length: 1 + rng.below(rng.chance(0.9) ? 4 : 64) }, () => header);
    return cat(b.subarray(0, s.end), ...copies, b.subarray(s.end));
  },
  /** A marker without a segment: TEM, RST, fill bytes, FF00, or one with a short length. */
  insertMarker(rng, b) {
    const to = rng.chance(0.8) ? rng.pick(boundaries(b)) : rng.below(b.length + 1);
    const m = rng.pick([
      [0xff, 0x01],
      [0xff, 0xd0 + rng.below(8)],
      [0xff, 0xff],
      [0xff, 0x00],
      [0xff, 0xd8],
      [0xff, 0xd9],
      [0xff, rng.below(256), 0x00, rng.below(5)],
    ]);
    return cat(b.subarray(0, to), Uint8Array.from(m), b.subarray(to));
  },
};

// TIFF ------------------------------------------------------------------------------------------

interface TiffIfd {
  /** Offset of the entry count; entries follow, 12 bytes each. */
  at: number;
  count: number;
}

/** Byte order and the IFDs of a classic TIFF, as far as they lie inside the file. */
function tiffIfds(b: Uint8Array): { le: boolean; ifds: TiffIfd[] } | undefined {
  if (b.length < 8) return undefined;
  const le = b[0] === 0x49;
  const ifds: TiffIfd[] = [];
  let at = readUint(b, 4, 4, le);
  while (at > 0 && at + 2 <= b.length && ifds.length < 4 && !ifds.some((d) => d.at === at)) {
    const count = readUint(b, at, 2, le);
    ifds.push({ at, count });
    at = readUint(b, at + 2 + 12 * count, 4, le);
  }
  return { le, ifds };
}

/** An entry's offset, in a random IFD of b. */
function tiffEntry(rng: Rng, b: Uint8Array): { le: boolean; ifd: TiffIfd; at: number } | undefined {
  const t = tiffIfds(b);
  const ifd = t && t.ifds.length ? rng.pick(t.ifds) : undefined;
  if (!t || !ifd || ifd.count === 0) return undefined;
  const at = ifd.at + 2 + 12 * rng.below(Math.min(ifd.count, 64));
  return at + 12 <= b.length ? { le: t.le, ifd, at } : undefined;
}

/** Tags that say how to read the pixels, and a few that point elsewhere in the file. */
const TIFF_TAGS = [
  254, 256, 257, 258, 259, 262, 273, 274, 277, 278, 279, 284, 317, 322, 323, 324, 325, 330, 332,
  338, 339, 347, 530, 532, 34665, 34675,
];
/** Values that matter for those tags: compressions, photometrics, edges. */
const TIFF_VALUES = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 255, 256, 32773, 32946, 34712, 34887, 65535, 0x10000,
  0x7fffffff, 0xffffffff,
];

/** The same mutation in every entry-level mutator: pick an entry, or fall back to bytes. */
function onEntry(f: (rng: Rng, out: Uint8Array, e: { le: boolean; at: number }) => void): Mutator {
  return (rng, b) => {
    const e = tiffEntry(rng, b);
    if (!e) return byteMutators.interestingWord!(rng, b, []);
    const out = copy(b);
    f(rng, out, e);
    return out;
  };
}

const tiffMutators: Record<string, Mutator> = {
  ...byteMutators,
  /** Byte order swapped, the magic number or the first IFD's offset changed. */
  tiffHeader(rng, b) {
    if (b.length < 8) return byteMutators.interestingByte!(rng, b, []);
    const out = copy(b);
    const le = out[0] === 0x49;
    const which = rng.below(3);
    if (which === 0) out.set(le ? [0x4d, 0x4d] : [0x49, 0x49], 0);
    else if (which === 1) writeUint(out, 2, rng.pick([0, 43, 0x2a00, 0xffff]), 2, le);
    else writeUint(out, 4, rng.pick([0, 2, 6, 7, b.length - 2, b.length, ...LONGS]), 4, le);
    return out;
  },
  ifdCount(rng, b) {
    const t = tiffIfds(b);
    if (!t || !t.ifds.length) return byteMutators.interestingWord!(rng, b, []);
    const ifd = rng.pick(t.ifds);
    const out = copy(b);
    const values = [0, 1, ifd.count - 1, ifd.count + 1, ifd.count * 2, 0xff, 0x100, 0xffff];
    writeUint(out, ifd.at, rng.pick(values), 2, t.le);
    return out;
  },
  ifdEntryTag: onEntry((rng, out, e) => writeUint(out, e.at, rng.pick(TIFF_TAGS), 2, e.le)),
  ifdEntryType: onEntry((rng, out, e) =>
    writeUint(out, e.at + 2, rng.chance(0.9) ? rng.below(14) : 0xffff, 2, e.le),
  ),
  ifdEntryCount: onEntry((rng, out, e) => {
    const n = readUint(out, e.at + 4, 4, e.le);
    writeUint(out, e.at + 4, rng.pick([...LONGS, n - 1, n + 1, n * 2, out.length]), 4, e.le);
  }),
  /** The value or offset: for a strip offset, a size or a compression, each its own edges. */
  ifdEntryValue: onEntry((rng, out, e) => {
    const v = rng.chance(0.3)
      ? rng.pick([out.length - 1, out.length, out.length + 1, 8, 10])
      : rng.pick(TIFF_VALUES);
    const short = readUint(out, e.at + 2, 2, e.le) === 3 && rng.chance(0.7);
    writeUint(out, e.at + 8, v, short ? 2 : 4, e.le);
  }),
  /** An entry duplicated or removed, with the count following (offsets after it now shifted). */
  ifdEntryDuplicate(rng, b) {
    const e = tiffEntry(rng, b);
    if (!e) return b;
    const out = cat(b.subarray(0, e.at + 12), b.subarray(e.at, e.at + 12), b.subarray(e.at + 12));
    writeUint(out, e.ifd.at, e.ifd.count + 1, 2, e.le);
    return out;
  },
  ifdEntryDelete(rng, b) {
    const e = tiffEntry(rng, b);
    if (!e) return b;
    const out = cat(b.subarray(0, e.at), b.subarray(e.at + 12));
    writeUint(out, e.ifd.at, e.ifd.count - 1, 2, e.le);
    return out;
  },
  /** The next-IFD offset: back to the first IFD (a loop), to itself, or anywhere. */
  nextIfd(rng, b) {
    const t = tiffIfds(b);
    if (!t || !t.ifds.length) return b;
    const ifd = rng.pick(t.ifds);
    const out = copy(b);
    const first = readUint(b, 4, 4, t.le);
    const values = [first, ifd.at, 8, b.length - 4, rng.below(b.length), 0xffffffff];
    writeUint(out, ifd.at + 2 + 12 * ifd.count, rng.pick(values), 4, t.le);
    return out;
  },
};

/** A mutated input: the seed it came from and the mutators applied, in order. */
export interface Mutant {
  bytes: Uint8Array;
  seedFile: number;
  steps: string[];
}

/** One to four mutations stacked on a seed (most finds need more than one). */
function mutate(rng: Rng, seeds: readonly Uint8Array[], mutators: Record<string, Mutator>): Mutant {
  const seedFile = rng.below(seeds.length);
  let bytes: Uint8Array = seeds[seedFile]!;
  const names = Object.keys(mutators);
  const steps: string[] = [];
  for (let n = 1 + rng.below(rng.chance(0.5) ? 2 : 4); n > 0; n--) {
    const name = rng.pick(names);
    steps.push(name);
    if (bytes.length) bytes = mutators[name]!(rng, bytes, seeds);
    if (bytes.length > MAX_INPUT) bytes = bytes.subarray(0, MAX_INPUT);
  }
  return { bytes, seedFile, steps };
}

// ---------------------------------------------------------------------------------------------
// Measuring

const TYPED_ARRAYS = [
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
] as const;

/**
 * Runs `task` with every typed-array constructor of this realm counting the bytes it allocates
 * (a view of an existing buffer allocates none). The sum over the task is at least its peak.
 * It sees what src/ code makes with `new Int16Array(n)` and the like, which is how jpeg-dc.ts
 * holds everything sized from the header; not Node's Buffers, nor copies made through
 * `slice()` of the input (libjpeg-sized Huffman values, at most the input's own size).
 */
export async function tallyTypedArrays<T>(
  task: () => Promise<T>,
): Promise<{ value?: T; error?: unknown; bytes: number }> {
  const g = globalThis as unknown as Record<string, unknown>;
  const saved = TYPED_ARRAYS.map((name) => [name, g[name]] as const);
  let bytes = 0;
  for (const [name, ctor] of saved)
    g[name] = new Proxy(ctor as new (...args: unknown[]) => ArrayBufferView, {
      construct(target, args, newTarget) {
        const made = Reflect.construct(target, args, newTarget) as ArrayBufferView;
        if (!(args[0] instanceof ArrayBuffer)) bytes += made.byteLength;
        return made;
      },
    });
  try {
    const value = await task();
    return { value, bytes };
  } catch (error) {
    return { error, bytes };
  } finally {
    for (const [name, ctor] of saved) g[name] = ctor;
  }
}

/**
 * The process's peak resident memory since the last reset, in bytes, from Linux's VmHWM
 * (reset by writing 5 to /proc/self/clear_refs). It sees native allocations (libvips, libtiff)
 * that no JavaScript hook can; it also sees the V8 heap, so it is a coarse upper bound.
 */
const rssPeak = {
  available: ((): boolean => {
    try {
      fs.writeFileSync('/proc/self/clear_refs', '5');
      return /VmHWM/.test(fs.readFileSync('/proc/self/status', 'utf8'));
    } catch {
      return false;
    }
  })(),
  /** Resets the peak to the current resident size, and returns that size. */
  reset(): number {
    if (!this.available) return 0;
    fs.writeFileSync('/proc/self/clear_refs', '5');
    return statusKb('VmRSS') * 1024;
  },
  read(): number {
    return this.available ? statusKb('VmHWM') * 1024 : 0;
  },
};

function statusKb(field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(
    fs.readFileSync('/proc/self/status', 'utf8'),
  );
  return m ? Number(m[1]) : 0;
}

// ---------------------------------------------------------------------------------------------
// Targets and the runner

/** What one input did. */
export interface Outcome {
  /** What the code under test threw, if it threw. */
  error?: unknown;
  /** Time in the code under test (the oracle's own calls, such as sharp's metadata, excluded). */
  ms: number;
  /** Bytes it allocated, measured as the target says. */
  allocated: number;
  /** Bytes the caller reserves for this input: the decode budget's weight. */
  budget: number;
  /** Peak resident memory above the input's start; native allocations included. */
  rss: number;
  /** An answer that is wrong though nothing was thrown (a frame libjpeg reads otherwise, say). */
  wrong?: string;
  /**
   * Why this input's resident memory is reported but not held to the bound: it lies outside
   * anything the service hands this code (a TIFF header rawTiff never writes).
   */
  outside?: string;
}

export interface Target<I> {
  name: string;
  make(rng: Rng): I;
  /** Where the input came from, for a finding. */
  describe(input: I): string;
  run(input: I): Promise<Outcome>;
  /** The errors the code answers bad input with; anything else thrown is a crash. */
  expected(e: unknown): boolean;
}

export interface Finding {
  index: number;
  input: string;
  detail: string;
}

export interface FuzzReport {
  target: string;
  seed: number;
  first: number;
  inputs: number;
  /** Inputs answered with a result, and refused with an expected error. */
  answered: number;
  refused: number;
  wallMs: number;
  inputsPerSecond: number;
  slowest: { ms: number; index: number };
  /** The most any input allocated, and its share of that input's budget. */
  mostAllocated: { bytes: number; budget: number; index: number };
  highestShareOfBudget: { share: number; bytes: number; budget: number; index: number };
  mostRss: { bytes: number; index: number; measured: boolean };
  /** Inputs outside what the service hands the code (Outcome.outside), and their peak. */
  outside: { inputs: number; mostRss: number; index: number; why: string };
  /** How many inputs missed each goal; the first few of each are listed below. */
  counts: { crashes: number; slow: number; overBudget: number; wrong: number };
  crashes: Finding[];
  slow: Finding[];
  overBudget: Finding[];
  wrong: Finding[];
  /** Why inputs were refused, the most frequent first (numbers replaced by #). */
  refusals: Array<[string, number]>;
}

export interface FuzzOptions {
  seed: number;
  inputs: number;
  /** The first index (a run can be resumed or split). */
  first?: number;
  /** An input slower than this is a finding. */
  maxMs?: number;
  /** Resident-memory bound per input for what the tally cannot see. */
  maxRss?: number;
  /** Called every `every` inputs with the report so far. */
  progress?: (r: FuzzReport) => void;
  every?: number;
  /** A file that always holds the input being run: what a native crash leaves behind. */
  trace?: string;
}

const KEEP = 20;

export async function fuzz<I>(target: Target<I>, o: FuzzOptions): Promise<FuzzReport> {
  const first = o.first ?? 0;
  const maxMs = o.maxMs ?? 1000;
  const r: FuzzReport = {
    target: target.name,
    seed: o.seed,
    first,
    inputs: 0,
    answered: 0,
    refused: 0,
    wallMs: 0,
    inputsPerSecond: 0,
    slowest: { ms: 0, index: -1 },
    mostAllocated: { bytes: 0, budget: 0, index: -1 },
    highestShareOfBudget: { share: 0, bytes: 0, budget: 0, index: -1 },
    mostRss: { bytes: 0, index: -1, measured: rssPeak.available },
    outside: { inputs: 0, mostRss: 0, index: -1, why: '' },
    counts: { crashes: 0, slow: 0, overBudget: 0, wrong: 0 },
    crashes: [],
    slow: [],
    overBudget: [],
    wrong: [],
    refusals: [],
  };
  const reasons = new Map<string, number>();
  const trace = o.trace ? fs.openSync(o.trace, 'w') : undefined;
  const started = performance.now();
  const keep = (
    kind: keyof FuzzReport['counts'],
    index: number,
    input: I,
    detail: string,
  ): void => {
    r.counts[kind]++;
    if (r[kind].length < KEEP) r[kind].push({ index, input: target.describe(input), detail });
  };
  try {
    for (let index = first; index < first + o.inputs; index++) {
      const input = target.make(new Rng(o.seed, index));
      if (trace !== undefined) {
        const line = `${target.name} seed ${o.seed} index ${index} ${target.describe(input)}\n`;
        fs.ftruncateSync(trace, 0);
        fs.writeSync(trace, line, 0);
      }
      const out = await target.run(input);
      r.inputs++;
      if (out.error === undefined) r.answered++;
      else if (target.expected(out.error)) {
        r.refused++;
        const why = String((out.error as Error).message)
          .replace(/\d+/g, '#')
          .slice(0, 80);
        reasons.set(why, (reasons.get(why) ?? 0) + 1);
      } else {
        const e = out.error as Error;
        keep('crashes', index, input, `${e?.constructor?.name}: ${e?.message}\n${e?.stack ?? ''}`);
      }
      if (out.ms > r.slowest.ms) r.slowest = { ms: out.ms, index };
      if (out.ms > maxMs) keep('slow', index, input, `${out.ms.toFixed(0)} ms`);
      if (out.allocated > r.mostAllocated.bytes)
        r.mostAllocated = { bytes: out.allocated, budget: out.budget, index };
      const share = out.budget > 0 ? out.allocated / out.budget : 0;
      if (share > r.highestShareOfBudget.share)
        r.highestShareOfBudget = { share, bytes: out.allocated, budget: out.budget, index };
      if (out.allocated > out.budget)
        keep('overBudget', index, input, `allocated ${out.allocated} B, budget ${out.budget} B`);
      if (out.outside !== undefined) {
        r.outside.inputs++;
        if (out.rss > r.outside.mostRss)
          r.outside = { ...r.outside, mostRss: out.rss, index, why: out.outside };
      } else {
        if (out.rss > r.mostRss.bytes) r.mostRss = { ...r.mostRss, bytes: out.rss, index };
        if (o.maxRss !== undefined && out.rss > o.maxRss)
          keep(
            'overBudget',
            index,
            input,
            `resident memory rose ${out.rss} B, bound ${o.maxRss} B`,
          );
      }
      if (out.wrong) keep('wrong', index, input, out.wrong);
      if (o.progress && (index - first + 1) % (o.every ?? 10_000) === 0) o.progress(finish());
    }
  } finally {
    if (trace !== undefined) fs.closeSync(trace);
  }
  return finish();

  function finish(): FuzzReport {
    r.wallMs = performance.now() - started;
    r.inputsPerSecond = r.inputs / (r.wallMs / 1000);
    r.refusals = [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 15);
    return r;
  }
}

// JPEG DC reader --------------------------------------------------------------------------------

/**
 * The frame within the pixel limit with the most 8 × 8 blocks (a long thin one has a partial
 * block more per row than a square one), four components: its DC image is the largest the
 * reader makes, its weight the most the analyzer ever reserves for a DC read.
 */
const LARGEST_DC_FRAME = ((): { width: number; height: number; channels: number } => {
  let most = { width: 0, height: 0, channels: 4 };
  const blocks = (f: { width: number; height: number }) =>
    Math.ceil(f.width / 8) * Math.ceil(f.height / 8);
  for (let width = 1; width <= 65535; width++) {
    const f = {
      width,
      height: Math.min(65535, Math.floor(LIMITS.imageMaxPixels / width)),
      channels: 4,
    };
    if (blocks(f) > blocks(most)) most = f;
  }
  return most;
})();
const LARGEST_DC_IMAGE =
  Math.ceil(LARGEST_DC_FRAME.width / 8) * Math.ceil(LARGEST_DC_FRAME.height / 8);
export const LARGEST_DC_WEIGHT = dcFootprint(LARGEST_DC_FRAME);

/** The analyzer's own admission (sharp-analyzer.ts): which inputs reach the DC reader, at what weight. */
async function dcAdmission(bytes: Uint8Array): Promise<Header | undefined> {
  // sharp throws at once for an empty input (the analyzer's format sniffing stops it before)
  if (!bytes.length) return undefined;
  const meta = await sharp(bytes, { limitInputPixels: false })
    .metadata()
    .catch(() => undefined);
  if (!meta || meta.format !== 'jpeg' || !meta.isProgressive) return undefined;
  if ((meta.width ?? 0) * (meta.height ?? 0) > LIMITS.imageMaxPixels) return undefined;
  return meta;
}

/**
 * decodeJpegDc on mutated JPEGs. Allocation: the typed arrays it makes (tallyTypedArrays),
 * against the weight the analyzer reserves for that input (dcFootprint of libjpeg's reading of
 * the header, through sharp's metadata) when the analyzer would call it, and otherwise against
 * the largest weight it ever reserves for one. Where libjpeg reads a header, the reader must
 * read the same frame: a different one would be decoded under another image's weight.
 */
export function jpegDcTarget(seeds: readonly Uint8Array[]): Target<Mutant> {
  return {
    name: 'jpeg-dc',
    make: (rng) => mutate(rng, seeds, jpegMutators),
    describe: (m) => `seed file ${m.seedFile}, ${m.steps.join(' + ')}, ${m.bytes.length} B`,
    expected: (e) => e instanceof DcUnsupported || (e as object)?.constructor === Error,
    async run({ bytes }) {
      const header = await dcAdmission(bytes);
      const budget = header ? dcFootprint(header) : LARGEST_DC_WEIGHT;
      const rss0 = rssPeak.reset();
      const t0 = performance.now();
      const { value, error, bytes: allocated } = await tallyTypedArrays(() => decodeJpegDc(bytes));
      const ms = performance.now() - t0;
      const rss = Math.max(0, rssPeak.read() - rss0);
      return { error, ms, allocated, budget, rss, wrong: value && dcWrong(value, header) };
    },
  };
}

function dcWrong(dc: DcImage, header: Header | undefined): string | undefined {
  if (dc.data.length !== dc.width * dc.height * dc.channels)
    return `${dc.data.length} samples for ${dc.width}×${dc.height}×${dc.channels}`;
  if (!header) return undefined;
  const want = [Math.ceil(header.width! / 8), Math.ceil(header.height! / 8), header.channels];
  const got = [dc.width, dc.height, dc.channels];
  return want.join() === got.join()
    ? undefined
    : `libjpeg reads a frame of ${want.join('×')} blocks, the DC reader ${got.join('×')}`;
}

// TIFF hand-off -------------------------------------------------------------------------------

/** sharp's options for the TIFF in sharp-analyzer.ts. */
const READ = {
  failOn: 'error',
  limitInputPixels: LIMITS.imageMaxPixels,
  pages: 1,
  sequentialRead: true,
} as const;

const SPACE = { 1: 'b-w', 3: 'srgb', 4: 'cmyk' } as const;

/** What rawTiff is given: the DC samples and the original's profile and orientation. */
export interface Written {
  image: DcImage;
  icc?: Uint8Array;
  orientation?: number;
  from: string;
}

export type TiffInput = { written: Written } | { mutant: Mutant };

/**
 * rawTiff and libvips's TIFF reader. Two kinds of input, half each:
 * - written: DC images (of the JPEG seeds, or random ones up to the largest a 40 MP frame
 *   gives) with an ICC profile (none, a real one, or up to 64 KB of random bytes) and an
 *   orientation; the TIFF must read back as exactly those samples, size, orientation and
 *   profile. Allocation: rawTiff's one output buffer (its 6–8 byte BitsPerSample list aside),
 *   against the weight dcFootprint gives the JPEG the samples come from; the profile, the
 *   original's own bytes copied, is counted apart in `iccBytes` (the weight does not count it).
 * - mutant: those TIFFs mutated (IFD entry counts, types, offsets, tags; header; bytes), read
 *   with the analyzer's options. The analyzer never hands libvips such bytes (only rawTiff's
 *   own), so this checks the reader behind the hand-off: an Error, never a crash or a hang,
 *   and, for a header rawTiff could have written, no more resident memory than the process's
 *   decode budget (other headers' peaks are reported apart: see outsideHandOff).
 */
export function tiffTarget(
  seeds: readonly Uint8Array[],
  images: readonly Written[],
  profiles: readonly Uint8Array[],
): Target<TiffInput> & { iccBytes: number } {
  const target = {
    name: 'tiff',
    iccBytes: 0,
    make(rng: Rng): TiffInput {
      if (rng.chance(0.5)) return { mutant: mutate(rng, seeds, tiffMutators) };
      return { written: written(rng, images, profiles) };
    },
    describe(input: TiffInput): string {
      if ('mutant' in input) {
        const m = input.mutant;
        return `seed TIFF ${m.seedFile}, ${m.steps.join(' + ')}, ${m.bytes.length} B`;
      }
      const w = input.written;
      const { width, height, channels } = w.image;
      return `written ${width}×${height}×${channels} (${w.from}), icc ${w.icc?.length ?? 'none'}, orientation ${w.orientation ?? 'none'}`;
    },
    expected: (e: unknown) => (e as object)?.constructor === Error,
    async run(input: TiffInput): Promise<Outcome> {
      return 'mutant' in input ? readMutant(input.mutant.bytes) : roundTrip(input.written);
    },
  };

  async function roundTrip(w: Written): Promise<Outcome> {
    const { width, height, channels, data } = w.image;
    const budget = dcFootprint({ width: width * 8, height: height * 8, channels });
    const rss0 = rssPeak.reset();
    const t0 = performance.now();
    const out: Outcome = { ms: 0, allocated: 0, budget, rss: 0 };
    try {
      const tiff = rawTiff(w.image, { icc: w.icc, orientation: w.orientation });
      // a profile of up to 4 bytes sits in its IFD entry; a longer one is a blob of its own
      const icc = (w.icc?.length ?? 0) > 4 ? w.icc!.length + (w.icc!.length & 1) : 0;
      target.iccBytes = Math.max(target.iccBytes, icc);
      out.allocated = tiff.length - icc;
      const meta = await sharp(tiff, READ).metadata();
      const space = SPACE[channels];
      const back = await sharp(tiff, READ)
        .pipelineColourspace(space)
        .toColourspace(space)
        .keepIccProfile() // the samples as stored: no conversion through the profile
        .raw()
        .toBuffer({ resolveWithObject: true });
      const problems = [
        meta.width !== width || meta.height !== height ? `size ${meta.width}×${meta.height}` : '',
        meta.space !== space || meta.channels !== channels ? `${meta.space} ${meta.channels}` : '',
        (meta.orientation ?? 1) !== (w.orientation ?? 1) ? `orientation ${meta.orientation}` : '',
        (meta.icc?.length ?? 0) !== (w.icc?.length ?? 0) ||
        (w.icc?.length && !Buffer.from(w.icc).equals(meta.icc!))
          ? 'ICC profile differs'
          : '',
        back.info.channels !== channels || !Buffer.from(data).equals(back.data)
          ? 'samples differ'
          : '',
      ].filter(Boolean);
      if (problems.length) out.wrong = `read back: ${problems.join(', ')}`;
    } catch (error) {
      // every written input is a valid image: refusing one is a wrong answer, not a refusal
      if ((error as object)?.constructor === Error)
        out.wrong = `refused: ${(error as Error).message}`;
      else out.error = error;
    }
    out.ms = performance.now() - t0;
    out.rss = Math.max(0, rssPeak.read() - rss0);
    return out;
  }

  async function readMutant(bytes: Uint8Array): Promise<Outcome> {
    const rss0 = rssPeak.reset();
    const t0 = performance.now();
    const out: Outcome = { ms: 0, allocated: 0, budget: LIMITS.decodeBudgetBytes, rss: 0 };
    try {
      const meta = await sharp(bytes, READ).metadata();
      out.outside = outsideHandOff(meta);
      // as the analyzer reads its TIFF (sequentially, shrunk to the embedder's input), without
      // the colour conversion, which is lcms's work rather than the reader's
      const cmyk = meta.space === 'cmyk';
      await (
        cmyk
          ? sharp(bytes, READ).pipelineColourspace('cmyk').toColourspace('cmyk')
          : sharp(bytes, READ)
      )
        .resize(224, 224, { fit: 'fill', fastShrinkOnLoad: true })
        .raw()
        .toBuffer();
    } catch (error) {
      out.error = error;
    }
    out.ms = performance.now() - t0;
    out.rss = Math.max(0, rssPeak.read() - rss0);
    return out;
  }

  return target;
}

/**
 * Why a TIFF header is none that rawTiff writes for the analyzer (a DC image: sides up to
 * 8192, at most LARGEST_DC_IMAGE pixels, 1, 3 or 4 channels of 8 bits), or undefined. libvips
 * was seen to take 300–670 MB for a 146-byte TIFF claiming 33,554,498 × 1 px, inside the pixel
 * limit: one reason the service reads no TIFF but its own.
 */
function outsideHandOff(meta: Metadata): string | undefined {
  const { width = 0, height = 0, channels = 0, depth } = meta;
  if (width > 8192 || height > 8192 || width * height > LARGEST_DC_IMAGE)
    return `${width}×${height} px`;
  if (![1, 3, 4].includes(channels) || depth !== 'uchar') return `${channels} × ${depth}`;
  return undefined;
}

/** A written input: a seed's DC image or a random one, with a profile and an orientation. */
function written(rng: Rng, images: readonly Written[], profiles: readonly Uint8Array[]): Written {
  let image: DcImage;
  let from: string;
  if (rng.chance(0.3)) {
    const seed = rng.pick(images);
    image = seed.image;
    from = seed.from;
  } else {
    const channels = rng.pick([1, 3, 4] as const);
    // mostly small; now and then as wide or as large as a 40 MP frame's DC image gets
    const [width, height] = rng.chance(0.995)
      ? [1 + rng.below(48), 1 + rng.below(48)]
      : rng.pick([
          [8192, 1 + rng.below(77)],
          [1 + rng.below(77), 8192],
          [791, 791],
        ]);
    image = { width, height, channels, data: rng.bytes(width * height * channels) };
    from = 'random';
  }
  const kind = rng.below(10);
  const icc =
    kind < 4
      ? undefined
      : kind < 6
        ? rng.pick(profiles)
        : rng.bytes(kind < 9 ? rng.below(2048) : rng.below(64 * 1024));
  const orientation = rng.chance(0.3) ? undefined : 1 + rng.below(8);
  return { image, icc, orientation, from };
}

// ---------------------------------------------------------------------------------------------
// Seeds

const FIXTURES = path.join(__dirname, '../fixtures/jpeg');

/**
 * Real JPEGs: the libjpeg-written fixtures (restart intervals, Adobe CMYK and YCCK, 4:2:0 and
 * 4:2:2) and what sharp writes: progressive grey, 4:4:4, 4:2:0, CMYK, mozjpeg's scan script, low
 * and high quality, with an ICC profile and EXIF orientation, odd and larger sizes, and a
 * baseline one (a mutation can make its frame progressive).
 */
export async function jpegSeeds(): Promise<Array<{ name: string; bytes: Uint8Array }>> {
  const fixtures = ['cmyk-restart.jpg', 'ycck-restart.jpg', 'ycc420-restart.jpg', 'ycc422.jpg'];
  const made: Array<[string, () => Promise<Buffer>]> = [
    ['grey', () => scene().toColourspace('b-w').jpeg({ progressive: true }).toBuffer()],
    ['4:4:4', () => scene().jpeg({ progressive: true, chromaSubsampling: '4:4:4' }).toBuffer()],
    ['4:2:0 q30', () => scene().jpeg({ progressive: true, quality: 30 }).toBuffer()],
    ['4:2:0 q95', () => scene().jpeg({ progressive: true, quality: 95 }).toBuffer()],
    ['cmyk', () => scene().toColourspace('cmyk').jpeg({ progressive: true }).toBuffer()],
    ['mozjpeg', () => scene().jpeg({ progressive: true, mozjpeg: true }).toBuffer()],
    [
      'icc + exif',
      () =>
        scene()
          .jpeg({ progressive: true })
          .withIccProfile('p3')
          .withMetadata({ orientation: 6 })
          .toBuffer(),
    ],
    ['9×7', () => scene().resize(9, 7).jpeg({ progressive: true }).toBuffer()],
    ['640×368', () => scene().resize(640, 368).jpeg({ progressive: true, quality: 50 }).toBuffer()],
    ['baseline', () => scene().jpeg().toBuffer()],
  ];
  return [
    ...fixtures.map((name) => ({ name, bytes: fs.readFileSync(path.join(FIXTURES, name)) })),
    ...(await Promise.all(made.map(async ([name, make]) => ({ name, bytes: await make() })))),
  ];
}

/** The TIFFs the analyzer writes for the JPEG seeds it reads from their DC scans. */
export async function tiffSeeds(
  jpegs: ReadonlyArray<{ name: string; bytes: Uint8Array }>,
): Promise<{ images: Written[]; tiffs: Uint8Array[]; profiles: Uint8Array[] }> {
  const images: Written[] = [];
  for (const { name, bytes } of jpegs) {
    const image = await decodeJpegDc(bytes).catch(() => undefined);
    if (!image) continue;
    const meta = await sharp(bytes).metadata();
    images.push({ image, icc: meta.icc, orientation: meta.orientation, from: name });
  }
  const p3 = (await sharp(await scene().jpeg().withIccProfile('p3').toBuffer()).metadata()).icc!;
  const grey = images.find((w) => w.image.channels === 1)!;
  const cmyk = images.find((w) => w.image.channels === 4)!;
  images.push({ ...grey, orientation: 8, icc: Uint8Array.from([1, 2, 3]), from: 'grey, odd icc' });
  images.push({ ...cmyk, orientation: 3, icc: p3, from: 'cmyk, p3 icc' });
  const tiffs = images.map((w) => rawTiff(w.image, { icc: w.icc, orientation: w.orientation }));
  return { images, tiffs, profiles: [p3] };
}
