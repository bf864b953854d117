import { Worker } from 'node:worker_threads';
import { fromThreadError, type ThreadError } from '../../lib/thread-error';
import { threadFile } from '../../lib/thread-file';
import { QUERYABLE_SCOPES } from '../value-index';
import type { ValueRow } from './memory-index';

/** item_values rows the Vision API may read (never privateMetadata). */
export const QUERYABLE = `scope IN (${QUERYABLE_SCOPES.map((s) => `'${s}'`).join(', ')})`;

export type ItemTuple = [pk: number, id: string, state: string, created: number, updated: number];
export type ValueTuple = [
  pk: number,
  field: string,
  isArray: ValueRow['isArray'],
  vtype: ValueRow['vtype'],
  sval: string | null,
  nval: number | null,
];
export type TermTuple = [pk: number, term: string];

/** One chunk of a dataset's items with their queryable values and words, each in pk order. */
export interface IndexChunk {
  items: ItemTuple[];
  values: ValueTuple[];
  terms: TermTuple[];
}

/**
 * The statements of an index build, on the reading thread (index-read-thread.ts) and of a
 * small build or catch-up on the main connection (index-sync.ts): each answers one JSON
 * array, built by SQLite, so a chunk crosses to the main thread as three strings, which
 * JSON.parse reads faster than better-sqlite3 makes rows. Floats print with 17 digits, so they parse back
 * exactly. `values` and `terms` take the chunk's lowest and highest pk: iv_item_field and
 * it_item_term lead with item_pk, so a range is one index walk; rows of other datasets'
 * items interleaved in it are skipped by the merge (their pks are not in the chunk).
 */
export const READ_SQL = {
  items: (chunk: number) =>
    `SELECT json_group_array(json_array(pk, id, state, created_at, updated_at) ORDER BY pk),
       min(pk), max(pk)
     FROM (SELECT pk, id, state, created_at, updated_at FROM items
           WHERE pk > ? AND +dataset_id = ? ORDER BY pk LIMIT ${chunk})`,
  values: `SELECT json_group_array(json_array(item_pk, field, is_array, vtype, sval, nval)
             ORDER BY item_pk)
           FROM item_values INDEXED BY iv_item_field
           WHERE item_pk BETWEEN ? AND ? AND ${QUERYABLE}`,
  terms: `SELECT json_group_array(json_array(item_pk, term) ORDER BY item_pk)
          FROM item_terms INDEXED BY it_item_term WHERE item_pk BETWEEN ? AND ?`,
};

export interface ReadInput {
  file: string;
  datasetId: string;
  /** Items per chunk. */
  chunk: number;
}

/** A chunk as the thread sends it, the end, or a failure (code: SQLite's). */
export type ReadMessage =
  { items: string; values: string; terms: string } | { done: true } | { error: ThreadError };

/**
 * A dataset's items, values and words in chunks of `chunk` items, read by a thread with its
 * own connection while the caller indexes the chunk before: the SQLite reads, most of a
 * build's time, run on another core. One chunk is read ahead, never more, so memory stays
 * bounded however slowly the caller indexes.
 */
export async function* readInThread(input: ReadInput): AsyncGenerator<IndexChunk> {
  const thread = new Worker(await threadFile(__dirname, 'index-read-thread'), {
    workerData: input,
  });
  const arrived: ReadMessage[] = [];
  let failure: unknown;
  let wake: (() => void) | undefined;
  thread.on('message', (m: ReadMessage) => {
    arrived.push(m);
    wake?.();
  });
  thread.once('error', (e) => {
    failure = e;
    wake?.();
  });
  thread.once('exit', (code) => {
    failure ??= new Error(`the index reading thread exited (${code})`);
    wake?.();
  });
  try {
    // one chunk in flight while the caller indexes the one before
    thread.postMessage('next');
    thread.postMessage('next');
    for (;;) {
      while (!arrived.length && failure === undefined)
        await new Promise<void>((resolve) => (wake = resolve));
      const m = arrived.shift();
      if (!m) throw failure;
      if ('error' in m) throw fromThreadError(m.error);
      if ('done' in m) return;
      thread.postMessage('next');
      yield {
        items: JSON.parse(m.items) as ItemTuple[],
        values: JSON.parse(m.values) as ValueTuple[],
        terms: JSON.parse(m.terms) as TermTuple[],
      };
    }
  } finally {
    await thread.terminate();
  }
}
