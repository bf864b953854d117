import type { Client } from '@elastic/elasticsearch';
import { CAS_RETRIES, backoff, unavailable } from './guard';
import { isConflict, isNotFound } from './indices';

export interface Versioned<T> {
  doc: T;
  seqNo: number;
  primaryTerm: number;
}

/** A realtime read of one document with its version; undefined when absent. */
export async function getVersioned<T>(
  client: Client,
  index: string,
  id: string,
): Promise<Versioned<T> | undefined> {
  try {
    const r = await client.get<T>({ index, id });
    if (!r.found || !r._source) return undefined;
    return { doc: r._source, seqNo: r._seq_no!, primaryTerm: r._primary_term! };
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/**
 * Read-modify-write of one document without scripting: the write carries the version it read
 * (`if_seq_no`/`if_primary_term`, or create-only when the document was absent), and a conflict
 * — another process wrote in between — reads again. `change` returns undefined to leave the
 * document as it is. After CAS_RETRIES conflicts the caller gets 503: never a lost update.
 */
export async function casUpdate<T>(
  client: Client,
  index: string,
  id: string,
  change: (current: T | undefined) => T | undefined | Promise<T | undefined>,
  opts: { refresh?: 'wait_for' | false; what?: string; known?: Versioned<T> } = {},
): Promise<{ doc: T | undefined; written: boolean; version?: Versioned<T> }> {
  let known = opts.known;
  for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
    // A version the caller remembers from its own last write saves the read. It is only ever
    // trusted for a write (a conflict says another process wrote since, and the next attempt
    // reads): a decision not to write is taken on a fresh read.
    const cur = known ?? (await getVersioned<T>(client, index, id));
    const next = await change(cur?.doc);
    if (next === undefined) {
      if (known) {
        known = undefined;
        attempt--;
        continue;
      }
      return { doc: cur?.doc, written: false, ...(cur ? { version: cur } : {}) };
    }
    try {
      const r = await client.index({
        index,
        id,
        document: next,
        ...(cur
          ? { if_seq_no: cur.seqNo, if_primary_term: cur.primaryTerm }
          : { op_type: 'create' as const }),
        ...(opts.refresh ? { refresh: opts.refresh } : {}),
      });
      return {
        doc: next,
        written: true,
        version: { doc: next, seqNo: r._seq_no!, primaryTerm: r._primary_term! },
      };
    } catch (e) {
      if (!isConflict(e)) throw e;
      if (known) known = undefined;
      else await backoff(attempt);
    }
  }
  throw unavailable(`${opts.what ?? id} changed concurrently too often; try again`, 1);
}

/**
 * Stores `{ value }` under `id` unless a value is there, and returns the stored one: of several
 * processes claiming at once, exactly one wins and all read its value.
 */
export async function claimValue(
  client: Client,
  index: string,
  id: string,
  value: string,
): Promise<string> {
  if (await createOnly(client, index, id, { value })) return value;
  return (await getVersioned<{ value: string }>(client, index, id))!.doc.value;
}

/** Create-only write: false when the document already exists. */
export async function createOnly(
  client: Client,
  index: string,
  id: string,
  document: unknown,
  refresh: 'wait_for' | false = false,
): Promise<boolean> {
  try {
    await client.create({ index, id, document, ...(refresh ? { refresh } : {}) });
    return true;
  } catch (e) {
    if (isConflict(e)) return false;
    throw e;
  }
}
