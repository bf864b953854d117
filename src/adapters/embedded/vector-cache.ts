import { project, type Projection } from '../../domain/tuning/lda';
import { stmt, type Db } from './db';
import { Int8Rows } from './int8-rows';
import { loadInThread, putRow, rowFiller, VECTORS_WHERE, type VectorRow } from './vector-load';
import { blobVector } from './vectors';

/**
 * A dataset's vectors of one embedder in memory: each row scalar-quantised to int8 codes with
 * its own scale (a quarter of float32's bytes), scanned with SIMD (Int8Rows) and then rescored
 * from the float32 vectors SQLite keeps (`floats`), so answers are the exact ones.
 */
export interface Matrix {
  version: number;
  embedder: string;
  dims: number;
  pks: Float64Array;
  rowOf: Map<number, number>;
  /** Row r's vector ≈ its codes × scale[r]; rows past pks.length are unused. */
  codes: Int8Rows;
  scale: Float32Array;
  /** The stored float32 vectors of these rows (a row whose vector is gone is left out). */
  floats(rows: readonly number[]): Map<number, Float32Array>;
  /** With a tuned-similarity projection (contract §20): each row's projection, as int8 codes. */
  tuned?: TunedRows;
}

/** A dataset's stored projection, named by its id, which is never reused. */
export interface Tuning {
  model: string;
  projection: Projection;
}

/** The rows' projected vectors (unit, k dims) scalar-quantised like the vectors themselves. */
export interface TunedRows extends Tuning {
  codes: Int8Rows;
  scale: Float32Array;
}

/** Datasets whose vectors are kept in memory at once (least recently used goes first). */
const MAX_DATASETS = 4;
/** Rows read back per statement when rescoring. */
const FLOAT_CHUNK = 500;
/** Up to this many vectors are loaded at once when asked for; more are loaded on a thread. */
const LOAD_NOW_ROWS = 5000;
/** Rows read per statement of a load on a thread. */
const LOAD_CHUNK = 1000;

export interface VectorCacheOptions {
  /** Larger datasets are loaded on a thread (default LOAD_NOW_ROWS). */
  loadNowRows?: number;
}

/**
 * A dataset's vectors as one Int8Array, so a search multiplies a contiguous matrix instead of
 * decoding a BLOB per row per query. Reloaded when the dataset's vector version (bumped by
 * every write that changes a vector, in any process) moves.
 */
export class VectorCache {
  private readonly matrices = new Map<string, Matrix>();
  /** Loads on threads under way, shared by every request that waits for one. */
  private readonly loading = new Map<string, Promise<Matrix>>();

  constructor(
    private readonly db: Db,
    private readonly options: VectorCacheOptions = {},
  ) {}

  /** The dataset's vector version now: a matrix of another version is out of date. */
  version(datasetId: string): number {
    return (
      (
        stmt(this.db, 'SELECT version FROM vector_versions WHERE dataset_id = ?').get(datasetId) as
          { version: number } | undefined
      )?.version ?? 0
    );
  }

  /**
   * The matrix as of now, loaded at once if need be (tests, the reference engine). With
   * `tuning`, its rows' projections too (a matrix holding them serves plain requests as well).
   */
  get(datasetId: string, embedder: string, tuning?: Tuning): Matrix {
    const key = `${datasetId}\u0000${embedder}`;
    const cached = this.matrices.get(key);
    if (cached && cached.version === this.version(datasetId) && fits(cached, tuning))
      return this.keep(key, cached);
    // one read transaction: the version, the count and the rows are of one snapshot
    return this.keep(key, this.db.transaction(() => this.load(datasetId, embedder, tuning))());
  }

  /**
   * The matrix with every vector written before the call. A large one is loaded on a thread
   * (better-sqlite3 is synchronous: a million vectors loaded at once would hold the process for
   * many seconds), and requests arriving during a load wait for it.
   * A load that began before a caller's version is not enough for that caller: it waits for
   * the next one.
   */
  async ready(datasetId: string, embedder: string, tuning?: Tuning): Promise<Matrix> {
    const key = `${datasetId}\u0000${embedder}`;
    for (;;) {
      const version = this.version(datasetId);
      const cached = this.matrices.get(key);
      if (cached && cached.version === version && fits(cached, tuning))
        return this.keep(key, cached);
      const pending = this.loading.get(key);
      if (pending) {
        const m = await pending;
        if (m.version >= version && fits(m, tuning)) return m;
        // a load for another projection: the next one is for this request's
        if (m.version >= version) this.matrices.delete(key);
        continue;
      }
      if (!this.onThread(datasetId, embedder)) return this.get(datasetId, embedder, tuning);
      // the next turn of the loop waits for it as any request would
      void this.startLoad(key, datasetId, embedder, tuning);
    }
  }

  /**
   * Starts loading a large dataset's plain matrix on a thread unless it is loaded or loading:
   * the engine asks for it when the dataset's index starts building, so both are ready at
   * about the same time instead of one after the other. A failure is left to the request
   * that next needs the matrix, which loads it again.
   */
  prefetch(datasetId: string, embedder: string): void {
    const key = `${datasetId}\u0000${embedder}`;
    if (this.loading.has(key) || this.matrices.get(key)?.version === this.version(datasetId))
      return;
    if (this.onThread(datasetId, embedder))
      this.startLoad(key, datasetId, embedder).catch(() => undefined);
  }

  /** Whether the matrix is loaded on a thread (a database in memory cannot be opened by one). */
  private onThread(datasetId: string, embedder: string): boolean {
    return (
      !this.db.memory &&
      this.size(datasetId, embedder).n > (this.options.loadNowRows ?? LOAD_NOW_ROWS)
    );
  }

  private startLoad(key: string, datasetId: string, embedder: string, tuning?: Tuning) {
    const load = this.loadOnThread(datasetId, embedder, tuning).finally(() =>
      this.loading.delete(key),
    );
    this.loading.set(key, load);
    return load;
  }

  private keep(key: string, m: Matrix): Matrix {
    this.matrices.delete(key);
    this.matrices.set(key, m);
    while (this.matrices.size > MAX_DATASETS)
      this.matrices.delete(this.matrices.keys().next().value!);
    return m;
  }

  /**
   * Rows to make room for (the dataset's vectors of every embedder: a count from the index
   * alone, where counting only this embedder's would read every row) and the dimensions.
   */
  private size(datasetId: string, embedder: string): { n: number; dims: number } {
    const { n } = stmt(this.db, 'SELECT count(*) AS n FROM item_vectors WHERE dataset_id = ?').get(
      datasetId,
    ) as { n: number };
    const one = stmt(
      this.db,
      `SELECT length(vec) AS bytes FROM item_vectors WHERE ${VECTORS_WHERE} LIMIT 1`,
    ).get(datasetId, embedder) as { bytes: number } | undefined;
    return { n: one ? n : 0, dims: (one?.bytes ?? 0) / 4 };
  }

  /** A matrix sized for the dataset's rows; `shared`: its arrays in memory a thread can fill. */
  private empty(
    datasetId: string,
    embedder: string,
    version: number,
    tuning?: Tuning,
    shared = false,
  ): Matrix {
    const { n, dims } = this.size(datasetId, embedder);
    const db = this.db;
    const array = <T>(of: new (b: ArrayBufferLike) => T, bytes: number): T =>
      new of(shared ? new SharedArrayBuffer(n * bytes) : new ArrayBuffer(n * bytes));
    const m: Matrix = {
      version,
      embedder,
      dims,
      pks: array(Float64Array, 8),
      rowOf: new Map(),
      codes: new Int8Rows(n, dims),
      scale: array(Float32Array, 4),
      floats: (rows) => floatsOf(db, datasetId, embedder, m, rows),
      // a projection of other dimensions (an embedder change) projects nothing
      ...(tuning && tuning.projection.dims === dims
        ? {
            tuned: {
              ...tuning,
              codes: new Int8Rows(n, tuning.projection.k),
              scale: array(Float32Array, 4),
            },
          }
        : {}),
    };
    return m;
  }

  private load(datasetId: string, embedder: string, tuning?: Tuning): Matrix {
    const m = this.empty(datasetId, embedder, this.version(datasetId), tuning);
    const fill = filler(m);
    // row by row, so loading never holds every vector as float32 at once
    for (const r of stmt(
      this.db,
      `SELECT item_pk, vec FROM item_vectors WHERE ${VECTORS_WHERE}`,
    ).iterate(datasetId, embedder) as Iterable<VectorRow>)
      if (!fill(r)) break;
    return fill.done();
  }

  /**
   * Reads the vectors on a thread of its own (vector-load-thread.ts), in pk order, LOAD_CHUNK
   * rows per statement, into the matrix's shared memory. The matrix carries the version read at
   * the start: rows read later may be newer, and any write since makes the next request load
   * again, so no change is missed for long.
   */
  private async loadOnThread(datasetId: string, embedder: string, tuning?: Tuning) {
    const m = this.db.transaction(() =>
      this.empty(datasetId, embedder, this.version(datasetId), tuning, true),
    )();
    let known = 0;
    const filled = await loadInThread(
      {
        file: this.db.name,
        datasetId,
        embedder,
        dims: m.dims,
        chunk: LOAD_CHUNK,
        pks: m.pks,
        codes: m.codes.memory,
        scale: m.scale,
        ...(m.tuned
          ? {
              tuned: {
                projection: m.tuned.projection,
                codes: m.tuned.codes.memory,
                scale: m.tuned.scale,
              },
            }
          : {}),
      },
      // each chunk's rows are indexed as it lands, so the end is no long synchronous stretch
      (n) => {
        for (; known < n; known++) m.rowOf.set(m.pks[known]!, known);
      },
    );
    if (filled < m.pks.length) m.pks = m.pks.slice(0, filled);
    return this.keep(`${datasetId}\u0000${embedder}`, m);
  }
}

/** Fills a matrix row by row (rowFiller), noting each row's pk; `done` trims it to the rows filled. */
function filler(m: Matrix): ((r: VectorRow) => boolean) & { done(): Matrix } {
  const fill = rowFiller(m);
  const each = (r: VectorRow): boolean => {
    const before = fill.filled();
    if (!fill(r)) return false;
    if (fill.filled() > before) m.rowOf.set(r.item_pk, before);
    return true;
  };
  return Object.assign(each, {
    done: () => {
      if (fill.filled() < m.pks.length) m.pks = m.pks.slice(0, fill.filled());
      return m;
    },
  });
}

/** Whether a matrix serves a request: a tuned one needs that projection's rows. */
const fits = (m: Matrix, tuning: Tuning | undefined): boolean =>
  !tuning || m.tuned?.model === tuning.model || tuning.projection.dims !== m.dims;

/** A matrix over vectors held in memory (row r's pk is r + 1), for tests and measurements. */
export function matrixOf(data: Float32Array, dims: number, tuning?: Tuning): Matrix {
  const n = data.length / dims;
  const m: Matrix = {
    version: 1,
    embedder: 'e',
    dims,
    pks: Float64Array.from({ length: n }, (_, i) => i + 1),
    rowOf: new Map(Array.from({ length: n }, (_, i) => [i + 1, i])),
    codes: new Int8Rows(n, dims),
    scale: new Float32Array(n),
    floats: (rows) => new Map(rows.map((r) => [r, data.slice(r * dims, (r + 1) * dims)])),
    ...(tuning
      ? {
          tuned: {
            ...tuning,
            codes: new Int8Rows(n, tuning.projection.k),
            scale: new Float32Array(n),
          },
        }
      : {}),
  };
  for (let i = 0; i < n; i++) putRow(m, i, data.subarray(i * dims, (i + 1) * dims));
  return m;
}

function floatsOf(
  db: Db,
  datasetId: string,
  embedder: string,
  m: Matrix,
  rows: readonly number[],
): Map<number, Float32Array> {
  const out = new Map<number, Float32Array>();
  const pks = [...new Set(rows)].map((r) => m.pks[r]!);
  for (let c = 0; c < pks.length; c += FLOAT_CHUNK) {
    const chunk = pks.slice(c, c + FLOAT_CHUNK);
    const found = stmt(
      db,
      `SELECT item_pk, vec FROM item_vectors WHERE dataset_id = ? AND embedder = ? AND item_pk IN (${chunk.map(() => '?').join(',')})`,
    ).all(datasetId, embedder, ...chunk) as Array<{ item_pk: number; vec: Buffer }>;
    for (const f of found) {
      const row = m.rowOf.get(f.item_pk);
      if (row !== undefined && f.vec.byteLength === m.dims * 4) out.set(row, blobVector(f.vec));
    }
  }
  return out;
}

/**
 * The dot product of two float32 vectors with four running sums, so the additions do not wait
 * on one another (2–3 times faster than one sum). It scores the candidates the int8 scan
 * (Int8Rows) picks; every exact score is computed here, so equal vectors score equal.
 */
export function dot(a: Float32Array, b: Float32Array): number {
  const n = Math.min(a.length, b.length);
  const tail = n - (n % 4);
  let d0 = 0;
  let d1 = 0;
  let d2 = 0;
  let d3 = 0;
  let j = 0;
  for (; j < tail; j += 4) {
    d0 += a[j]! * b[j]!;
    d1 += a[j + 1]! * b[j + 1]!;
    d2 += a[j + 2]! * b[j + 2]!;
    d3 += a[j + 3]! * b[j + 3]!;
  }
  for (; j < n; j++) d0 += a[j]! * b[j]!;
  return d0 + d1 + (d2 + d3);
}

/**
 * Candidates the int8 scan keeps beyond the k asked, rescored exactly: 3·k, at least 16 and at
 * most 1,024 (a deep page reads its k float32 vectors back either way). On the real vectors
 * of the similarity measurements the exact top k is always among them (docs/engines.md).
 */
const extraCandidates = (k: number): number => Math.min(Math.max(3 * k, 16), 1024);

/**
 * The rows nearest `query` among the given rows (all rows when `rows` is undefined): top k by
 * exact dot product. The int8 codes pick candidates (extraCandidates, and every row tied with
 * the last of them, so copies of one vector stay together), which are rescored from the stored
 * float32 vectors. With `ties`, rows scoring exactly the k-th score are returned too (after the k), so
 * a caller can break ties by its own key and cut one order at any k.
 */
export function topK(
  m: Matrix,
  query: Float32Array,
  k: number,
  rows: ArrayLike<number> | undefined,
  skip: Set<number>,
  ties = false,
  blend?: Blend,
): Array<{ row: number; d: number }> {
  if (k <= 0) return [];
  const tuned = blend && m.tuned ? { ...blend, rows: m.tuned } : undefined;
  const zq = tuned && project(tuned.rows.projection, query);
  const candidates = scan(
    m,
    query,
    k + extraCandidates(k),
    rows,
    skip,
    tuned && { ...tuned, zq: zq! },
  );
  const floats = m.floats(candidates);
  const exact: Array<{ row: number; d: number }> = [];
  for (const row of candidates) {
    const v = floats.get(row);
    if (!v) continue;
    const d = tuned
      ? (1 - tuned.weight) * dot(query, v) +
        tuned.weight * dot(zq!, project(tuned.rows.projection, v))
      : dot(query, v);
    exact.push({ row, d });
  }
  exact.sort((a, b) => b.d - a.d);
  if (exact.length <= k) return exact;
  const kth = exact[k - 1]!.d;
  return ties
    ? [...exact.slice(0, k), ...exact.slice(k).filter((e) => e.d === kth)]
    : exact.slice(0, k);
}

/**
 * Tuned similarity (contract §20): rank by (1 − weight) · cos(plain) + weight · cos(projected),
 * when the matrix holds its rows' projections.
 */
export interface Blend {
  weight: number;
}

/** The int8 scan: the `want` best rows by approximate dot product, and rows tied with the last. */
function scan(
  m: Matrix,
  query: Float32Array,
  want: number,
  rows: ArrayLike<number> | undefined,
  skip: Set<number>,
  tuned?: Blend & { rows: TunedRows; zq: Float32Array },
): number[] {
  const top: Array<{ row: number; d: number }> = [];
  let floor = -Infinity;
  let tied: number[] = [];
  const consider = (row: number, d: number) => {
    if (skip.size && skip.has(row)) return;
    if (top.length < want) {
      top.push({ row, d });
      if (top.length === want) {
        top.sort((a, b) => b.d - a.d);
        floor = top[want - 1]!.d;
      }
    } else if (d > floor) {
      // binary insertion: the candidate list runs to hundreds, too long to sort per entry
      const out = top.pop()!;
      let lo = 0;
      let hi = top.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (top[mid]!.d >= d) lo = mid + 1;
        else hi = mid;
      }
      top.splice(lo, 0, { row, d });
      const was = floor;
      floor = top[want - 1]!.d;
      if (floor > was) tied = [];
      if (out.d === floor) tied.push(out.row);
    } else if (d === floor) tied.push(row);
  };
  approximate(m, query, rows, tuned, consider);
  return [...top.map((t) => t.row), ...tied];
}

/**
 * Each row's approximate score from the int8 codes, in row order: the dot product, or with a
 * projection the blend of both (each part scanned over its own codes, then combined).
 */
function approximate(
  m: Matrix,
  query: Float32Array,
  rows: ArrayLike<number> | undefined,
  tuned: (Blend & { rows: TunedRows; zq: Float32Array }) | undefined,
  visit: (row: number, d: number) => void,
): void {
  const each = (codes: Int8Rows, f: (row: number, score: number) => void) =>
    rows ? codes.gather(rows, f) : codes.range(0, m.pks.length, f);
  const q = m.codes.load(query);
  const { scale } = m;
  if (!tuned) {
    each(m.codes, (row, score) => visit(row, score * q.scale * scale[row]!));
    return;
  }
  const plain = new Float64Array(rows ? rows.length : m.pks.length);
  const w = tuned.weight;
  let i = 0;
  each(m.codes, (row, score) => (plain[i++] = (1 - w) * score * q.scale * scale[row]!));
  const t = tuned.rows;
  const zq = t.codes.load(tuned.zq);
  i = 0;
  each(t.codes, (row, score) => visit(row, plain[i++]! + w * score * zq.scale * t.scale[row]!));
}
