import type { Client } from '@elastic/elasticsearch';
import { isConflict, isNotFound } from './indices';
import { unavailable } from './outage';

/** Optimistic-concurrency retries before a write gives up with 503. */
export const CAS_RETRIES = 8;

/** Exponential backoff with jitter between optimistic-concurrency retries. */
export const backoff = (attempt: number): Promise<void> =>
  new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 5 * 2 ** attempt)));

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
 * document as it is. After CAS_RETRIES conflicts (or `attempts`) the caller gets 503: never a
 * lost update.
 *
 * `known`, a version the caller remembers from its own last write, saves the first read. It is
 * only trusted for a write (a conflict says another process wrote since); a decision not to
 * write is always taken on a fresh read.
 *
 * A write whose answer is lost (a timeout, or the client's own retry of a write that had landed
 * meeting its new version as a conflict) must not be applied twice. With `unique` (the caller
 * puts an id of its own in every document it writes), a document that then reads exactly as
 * the write left it is taken as that write, done. Without it two writers can leave equal
 * documents (two increments of one count), so nothing is inferred.
 */
export async function casUpdate<T>(
  client: Client,
  index: string,
  id: string,
  change: (current: T | undefined) => T | undefined | Promise<T | undefined>,
  opts: { what?: string; known?: Versioned<T>; attempts?: number; unique?: boolean } = {},
): Promise<{ doc: T | undefined; written: boolean; version?: Versioned<T> }> {
  let tried: string | undefined;
  const unique = opts.unique ?? false;
  if (opts.known) {
    const next = await change(opts.known.doc);
    const version =
      next === undefined ? undefined : await write(client, index, id, opts.known, next, unique);
    if (version) return { doc: next, written: true, version };
    if (next !== undefined && unique) tried = JSON.stringify(next);
  }
  for (let attempt = 0; attempt < (opts.attempts ?? CAS_RETRIES); attempt++) {
    const cur = await getVersioned<T>(client, index, id);
    if (cur && tried !== undefined && JSON.stringify(cur.doc) === tried)
      return { doc: cur.doc, written: true, version: cur };
    const next = await change(cur?.doc);
    if (next === undefined)
      return { doc: cur?.doc, written: false, ...(cur ? { version: cur } : {}) };
    const version = await write(client, index, id, cur, next, unique);
    if (version) return { doc: next, written: true, version };
    if (unique) tried = JSON.stringify(next);
    await backoff(attempt);
  }
  throw unavailable(`${opts.what ?? id} changed concurrently too often; try again`, 1);
}

/** Writes `next` over version `cur` (create-only when absent); undefined on a conflict. */
async function write<T>(
  client: Client,
  index: string,
  id: string,
  cur: Versioned<T> | undefined,
  next: T,
  unique: boolean,
): Promise<Versioned<T> | undefined> {
  try {
    const r = await client.index({
      index,
      id,
      document: next,
      ...(cur
        ? { if_seq_no: cur.seqNo, if_primary_term: cur.primaryTerm }
        : { op_type: 'create' as const }),
    });
    return { doc: next, seqNo: r._seq_no!, primaryTerm: r._primary_term! };
  } catch (e) {
    if (isConflict(e)) return undefined;
    if (!unique) throw e;
    // no answer: the write may have landed all the same
    const now = await getVersioned<T>(client, index, id).catch(() => undefined);
    if (now && JSON.stringify(now.doc) === JSON.stringify(next)) return now;
    throw e;
  }
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
): Promise<boolean> {
  try {
    await client.create({ index, id, document });
    return true;
  } catch (e) {
    if (isConflict(e)) return false;
    throw e;
  }
}

/**
 * An installation-wide lease kept in document `id` of `index` (`kind: 'lease'`, `owner`,
 * `claim_until`): true when `owner` holds it until `until` — it held it, or nobody held it past
 * `now`. Versioned, so of two processes claiming at once one wins.
 */
export async function claimLease(
  client: Client,
  index: string,
  id: string,
  lease: { owner: string; now: number; until: number },
  opts: { what: string; attempts?: number },
): Promise<boolean> {
  type Lease = { kind: 'lease'; owner?: string; claim_until?: number };
  const r = await casUpdate<Lease>(
    client,
    index,
    id,
    (cur) =>
      cur && cur.owner !== lease.owner && (cur.claim_until ?? 0) > lease.now
        ? undefined
        : { kind: 'lease', owner: lease.owner, claim_until: lease.until },
    opts,
  );
  return r.written;
}
