/**
 * vector-load-thread runs as a worker thread: it reads a dataset's vectors from its own SQLite
 * connection and quantises them straight into the matrix's shared memory (vector-cache.ts),
 * so loading a million vectors takes a core of its own instead of slices of the main thread.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { threadError } from '../../lib/thread-error';
import { Int8Rows } from './int8-rows';
import {
  rowFiller,
  VECTORS_WHERE,
  type LoadInput,
  type LoadMessage,
  type VectorRow,
} from './vector-load';

const input = workerData as LoadInput;
const post = (m: LoadMessage) => parentPort!.postMessage(m);

try {
  // no mmap here: the vectors are read once, and mapped pages would count as the process's
  const db = new Database(input.file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 10000');
    const fill = rowFiller({
      dims: input.dims,
      pks: input.pks,
      codes: new Int8Rows(input.pks.length, input.dims, input.codes),
      scale: input.scale,
      ...(input.tuned
        ? {
            tuned: {
              ...input.tuned,
              codes: new Int8Rows(input.pks.length, input.tuned.projection.k, input.tuned.codes),
            },
          }
        : {}),
    });
    const next = db.prepare(
      `SELECT item_pk, vec FROM item_vectors WHERE ${VECTORS_WHERE}
       AND item_pk > ? ORDER BY item_pk LIMIT ${input.chunk}`,
    );
    let after = Number.MIN_SAFE_INTEGER;
    for (;;) {
      const rows = next.all(input.datasetId, input.embedder, after) as VectorRow[];
      if (!rows.length || !rows.every(fill)) break;
      after = rows[rows.length - 1]!.item_pk;
      post({ filled: fill.filled() });
    }
    post({ filled: fill.filled(), done: true });
  } finally {
    db.close();
  }
} catch (e) {
  post({ error: threadError(e) });
}
