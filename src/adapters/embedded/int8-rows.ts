import { INT8_DOT_WASM } from './int8-dot-wasm';

/** The WebAssembly calls used here (the Node 20 type definitions declare none). */
interface Wasm {
  Module: new (bytes: Uint8Array) => object;
  Memory: new (d: { initial: number; maximum: number; shared: true }) => RowsMemory;
  Instance: new (m: object, imports: object) => { exports: unknown };
}
/** A WebAssembly memory shared between threads (its buffer a SharedArrayBuffer). */
export interface RowsMemory {
  buffer: ArrayBufferLike;
}
const { Module, Memory, Instance } = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;
const wasm = ((): object => {
  try {
    return new Module(Buffer.from(INT8_DOT_WASM, 'base64'));
  } catch (e) {
    throw new Error(
      `the embedded engine needs WebAssembly SIMD (x86-64 with SSE4.1, or ARM64): ${String(e)}`,
      { cause: e },
    );
  }
})();
const PAGE = 65_536;
/** A 32-bit WebAssembly memory: 65,536 pages, less one so no address wraps to 0. */
const MAX_PAGES = 65_535;
/** Rows scored per call into the module (its output area). */
const CHUNK = 4096;

interface Kernel {
  range(q: number, codes: number, first: number, count: number, dp: number, out: number): void;
  gather(q: number, codes: number, rows: number, count: number, dp: number, out: number): void;
  quantise(src: number, n: number, dst: number): number;
}

/**
 * Rows of int8 codes in a WebAssembly memory of their own, scored against a query with SIMD
 * (int8-dot.wat): V8 does not vectorise the same loop in JavaScript, which runs about thirty
 * times slower. A query is quantised to int16 for the products (`load`); `bound` says how far
 * the scaled integer score can be from the exact dot product with the float32 vectors.
 */
export class Int8Rows {
  /** Bytes per row: dims rounded up to a multiple of 16, the rest zeros. */
  readonly padded: number;
  /** Row r's codes are codes[r·padded … r·padded + dims). */
  readonly codes: Int8Array;
  /** The memory the rows live in, shared: a thread may write rows while no one reads them. */
  readonly memory: RowsMemory;
  private readonly kernel: Kernel;
  private readonly query: Int16Array;
  private readonly list: Int32Array;
  private readonly out: Int32Array;
  /** A row to quantise, as float32; past dims it stays zero, so padding codes are zeros. */
  private readonly src: Float32Array;
  private readonly at: { list: number; out: number; src: number; codes: number };
  /** The largest query code: |code| · 127 · padded stays below 2³¹. */
  private readonly qmax: number;

  /**
   * With `memory` (another Int8Rows' of the same count and dims, sent to a thread), the rows
   * are that one's: a loading thread quantises into a matrix in place.
   */
  constructor(
    count: number,
    readonly dims: number,
    memory?: RowsMemory,
  ) {
    this.padded = Math.max(16, Math.ceil(dims / 16) * 16);
    const list = this.padded * 2;
    const out = list + CHUNK * 4;
    const src = out + CHUNK * 4;
    const codes = src + this.padded * 4;
    const pages = Math.ceil((codes + count * this.padded) / PAGE) || 1;
    if (pages > MAX_PAGES)
      throw new RangeError(
        `${count} vectors of ${dims} dimensions exceed one matrix's 4 GiB of int8 codes`,
      );
    this.memory = memory ?? new Memory({ initial: pages, maximum: pages, shared: true });
    if (this.memory.buffer.byteLength < pages * PAGE)
      throw new RangeError(
        `a memory of ${this.memory.buffer.byteLength} bytes cannot hold the rows`,
      );
    this.kernel = new Instance(wasm, { env: { memory: this.memory } }).exports as unknown as Kernel;
    this.at = { list, out, src, codes };
    this.query = new Int16Array(this.memory.buffer, 0, this.padded);
    this.list = new Int32Array(this.memory.buffer, list, CHUNK);
    this.out = new Int32Array(this.memory.buffer, out, CHUNK);
    this.src = new Float32Array(this.memory.buffer, src, this.padded);
    this.codes = new Int8Array(this.memory.buffer, codes, count * this.padded);
    this.qmax = Math.min(32_767, Math.floor((2 ** 31 - 1) / (127 * this.padded)));
  }

  /**
   * Quantises `v` (dims values) into row `row` and returns the row's scale: its vector is
   * about codes × scale, each code within half a step (int8-dot.wat, `quantise`).
   */
  quantise(row: number, v: Float32Array): number {
    this.src.set(v.subarray(0, this.dims));
    return this.kernel.quantise(this.at.src, this.padded, this.at.codes + row * this.padded);
  }

  /** Copies one row's codes in (`from` holds dims codes at `at`). */
  set(row: number, from: Int8Array, at: number): void {
    this.codes.set(from.subarray(at, at + this.dims), row * this.padded);
  }

  /**
   * Makes `query` the one scored against. A row's score × `scale` × its own code scale s is
   * within s × `slack` of the exact dot product of `query` with the row's vector: half a code
   * step of the row on every dimension, weighted by the query, plus half a query step against
   * the row's largest codes.
   */
  load(query: ArrayLike<number>): { scale: number; slack: number } {
    let max = 0;
    let l1 = 0;
    for (let j = 0; j < this.dims; j++) {
      const a = Math.abs(query[j]!);
      l1 += a;
      if (a > max) max = a;
    }
    const scale = max / this.qmax || 1;
    for (let j = 0; j < this.dims; j++) this.query[j] = Math.round(query[j]! / scale);
    return { scale, slack: l1 / 2 + (scale * 127 * this.dims) / 2 };
  }

  /** Calls `visit` with each row of [first, first + count) and its integer score. */
  range(first: number, count: number, visit: (row: number, score: number) => void): void {
    for (let from = first; from < first + count; from += CHUNK) {
      const n = Math.min(CHUNK, first + count - from);
      this.kernel.range(0, this.at.codes, from, n, this.padded, this.at.out);
      for (let i = 0; i < n; i++) visit(from + i, this.out[i]!);
    }
  }

  /** Calls `visit` with each of `rows` and its integer score. */
  gather(rows: ArrayLike<number>, visit: (row: number, score: number) => void): void {
    for (let from = 0; from < rows.length; from += CHUNK) {
      const n = Math.min(CHUNK, rows.length - from);
      for (let i = 0; i < n; i++) this.list[i] = rows[from + i]!;
      this.kernel.gather(0, this.at.codes, this.at.list, n, this.padded, this.at.out);
      for (let i = 0; i < n; i++) visit(this.list[i]!, this.out[i]!);
    }
  }
}
