import { Worker } from 'node:worker_threads';
import type { Projection } from '../../domain/tuning/lda';
import { fromThreadError, type ThreadError } from '../../lib/thread-error';
import { threadFile } from '../../lib/thread-file';
import type { RowsMemory } from './int8-rows';

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
