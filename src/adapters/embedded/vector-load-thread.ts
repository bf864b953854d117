/**
 * vector-load-thread runs as a worker thread: it reads a dataset's vectors from its own SQLite
 * connection and quantises them straight into the matrix's shared memory (vector-cache.ts),
 * so loading a million vectors takes a core of its own instead of slices of the main thread.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { project } from '../../domain/tuning/lda';
import { threadError } from '../../lib/thread-error';
import { Int8Rows } from './int8-rows';
import type { LoadInput, LoadMessage } from './vector-load';

const input = workerData as LoadInput;
const post = (m: LoadMessage) => parentPort!.postMessage(m);

try {
  // no mmap here: the vectors are read once, and mapped pages would count as the process's
  const db = new Database(input.file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 10000');
    const codes = new Int8Rows(input.pks.length, input.dims, input.codes);
    const tuned = input.tuned && {
      ...input.tuned,
      rows: new Int8Rows(input.pks.length, input.tuned.projection.k, input.tuned.codes),
    };
    const next = db.prepare(
      `SELECT item_pk, vec FROM item_vectors WHERE dataset_id = ? AND embedder = ?
       AND length(vec) > 0 AND item_pk > ? ORDER BY item_pk LIMIT ${input.chunk}`,
    );
    const vector = new Float32Array(input.dims);
    const bytes = new Uint8Array(vector.buffer);
    let filled = 0;
    let after = Number.MIN_SAFE_INTEGER;
    for (let full = false; !full;) {
      const rows = next.all(input.datasetId, input.embedder, after) as Array<{
        item_pk: number;
        vec: Buffer;
      }>;
      if (!rows.length) break;
      for (const r of rows) {
        // rows added since the matrix was sized wait for the next load
        if (filled >= input.pks.length) {
          full = true;
          break;
        }
        // rows of another length (a change of embedder dimensions mid-write) are left out
        if (r.vec.byteLength !== input.dims * 4) continue;
        bytes.set(r.vec);
        input.pks[filled] = r.item_pk;
        input.scale[filled] = codes.quantise(filled, vector);
        if (tuned)
          tuned.scale[filled] = tuned.rows.quantise(filled, project(tuned.projection, vector));
        filled++;
      }
      after = rows[rows.length - 1]!.item_pk;
      post({ filled });
    }
    post({ filled, done: true });
  } finally {
    db.close();
  }
} catch (e) {
  post({ error: threadError(e) });
}
