/**
 * index-read-thread runs as a worker thread: it reads a dataset's items, values and words for
 * an index build (index-read.ts), a chunk per request, from its own read-only connection.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { threadError } from '../../lib/thread-error';
import { READ_SQL, type ReadInput, type ReadMessage } from './index-read';

const input = workerData as ReadInput;
const post = (m: ReadMessage) => parentPort!.postMessage(m);

/** The connection and statements, opened on the first request so a failure is answered. */
let reader:
  { items: Database.Statement; values: Database.Statement; terms: Database.Statement } | undefined;
let after = Number.MIN_SAFE_INTEGER;

function open() {
  const db = new Database(input.file, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 10000');
  return {
    items: db.prepare(READ_SQL.items(input.chunk)).raw(),
    values: db.prepare(READ_SQL.values).raw(),
    terms: db.prepare(READ_SQL.terms).raw(),
  };
}

parentPort!.on('message', () => {
  try {
    const r = (reader ??= open());
    const [json, lo, hi] = r.items.get(after, input.datasetId) as [string, number | null, number];
    if (lo === null) return post({ done: true });
    post({
      items: json,
      values: (r.values.get(lo, hi) as [string])[0],
      terms: (r.terms.get(lo, hi) as [string])[0],
    });
    after = hi;
  } catch (e) {
    post({ error: threadError(e) });
  }
});
