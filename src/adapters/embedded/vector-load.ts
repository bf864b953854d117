import { Worker } from 'node:worker_threads';
import { project, type Projection } from '../../domain/tuning/lda';
import { fromThreadError, type ThreadError } from '../../lib/thread-error';
import { threadFile } from '../../lib/thread-file';
import type { Int8Rows, RowsMemory } from './int8-rows';

/** Only vectors that can be compared: an empty one records an image not embedded again. */
export const VECTORS_WHERE = 'dataset_id = ? AND embedder = ? AND length(vec) > 0';

export interface VectorRow {
  item_pk: number;
  vec: Buffer;
}

/** The arrays a load fills: a matrix's, or a thread's views of them. */
export interface RowTarget {
  dims: number;
  pks: Float64Array;
  codes: Int8Rows;
  scale: Float32Array;
  tuned?: { projection: Projection; codes: Int8Rows; scale: Float32Array };
}

/**
 * Fills the target's rows in order, one stored vector each, quantised (and projected when the
 * target is tuned); false once the target is full: rows added since it was sized wait for the
 * next load. `filled` is the number of rows in place.
 */
export function rowFiller(t: RowTarget): ((r: VectorRow) => boolean) & { filled(): number } {
  let i = 0;
  const vector = new Float32Array(t.dims);
  const bytes = new Uint8Array(vector.buffer);
  const fill = (r: VectorRow): boolean => {
    if (i >= t.pks.length) return false;
    // rows of another length (a change of embedder dimensions mid-write) are left out
    if (r.vec.byteLength !== t.dims * 4) return true;
    bytes.set(r.vec);
    t.pks[i] = r.item_pk;
    putRow(t, i++, vector);
    return true;
  };
  return Object.assign(fill, { filled: () => i });
}

/** Quantises `vector` into row `row` of the target (and its projection, when tuned). */
export function putRow(t: Omit<RowTarget, 'pks'>, row: number, vector: Float32Array): void {
  t.scale[row] = t.codes.quantise(row, vector);
  if (t.tuned)
    t.tuned.scale[row] = t.tuned.codes.quantise(row, project(t.tuned.projection, vector));
}

/**
 * What a loading thread (vector-load-thread.ts) is given: where to read, and the matrix's
 * arrays, every one in shared memory, to fill in place.
 */
export interface LoadInput {
  file: string;
  datasetId: string;
  embedder: string;
  dims: number;
  /** Rows read per statement: each statement is a read transaction of its own. */
  chunk: number;
  /** Row r's item pk; its length is the matrix's capacity. */
  pks: Float64Array;
  codes: RowsMemory;
  scale: Float32Array;
  tuned?: { projection: Projection; codes: RowsMemory; scale: Float32Array };
}

/** Progress (rows [0, filled) are in place), the end, or a failure (code: SQLite's). */
export type LoadMessage = { filled: number; done?: true } | { error: ThreadError };

/**
 * Runs a loading thread over `input`; `progress` is called with each new count of rows in
 * place, and the promise resolves with the last. A failure keeps SQLite's code, so a busy or
 * unreadable file is still told apart from a bug (sqliteOutage).
 */
export async function loadInThread(
  input: LoadInput,
  progress: (filled: number) => void,
): Promise<number> {
  const thread = new Worker(await threadFile(__dirname, 'vector-load-thread'), {
    workerData: input,
  });
  try {
    return await new Promise<number>((resolve, reject) => {
      thread.on('message', (m: LoadMessage) => {
        if ('error' in m) return reject(fromThreadError(m.error));
        progress(m.filled);
        if (m.done) resolve(m.filled);
      });
      thread.once('error', reject);
      thread.once('exit', (code) =>
        reject(new Error(`the vector loading thread exited (${code})`)),
      );
    });
  } finally {
    await thread.terminate();
  }
}
