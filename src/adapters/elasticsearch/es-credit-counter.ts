import crypto from 'node:crypto';
import type { RequestType } from '../../domain/plan';
import {
  utcYearMonth as ym,
  type Admission,
  type ChargeReceipt,
  type MonthUsage,
  type RequestCharge,
} from '../../ports/usage-ledger';
import { KeyedGroupCommit } from '../group-commit';
import { casUpdate, getVersioned, type Versioned } from './cas';
import type { EsIndices } from './indices';
import { unavailable } from './outage';

/** A lease's credits stay set aside this long after it is taken: a crashed holder's come back then. */
export const LEASE_TTL_MS = 25_000;
/**
 * A holder stops admitting from a lease this long before it ends, so the records of what it
 * admitted (a linger, a write, the retries of RECORD_ATTEMPTS) land while the lease still sets
 * their credits aside, with 10 s to spare for hosts' clocks that differ.
 */
const LEASE_MARGIN_MS = 15_000;
/** A lease unused this long is given back, so other hosts can spend the rest of a package. */
const IDLE_RETURN_MS = 1_000;
/** A block is at most this share of the credits free when it is taken, so blocks shrink near the end… */
const BLOCK_SHARE = 16;
/** …and at most this many requests' worth. */
const MAX_BLOCK_REQUESTS = 256;
/** How long a charge waits for credits other hosts hold before answering 503 rather than 402. */
const HELD_WAIT_MS = 3_000;
const HELD_RETRY_MS = 100;
/**
 * Records of charges admitted from a lease wait this long for others to share their write:
 * nobody waits on them, and the counter then takes a few writes a second per process, not one
 * per batch of requests.
 */
const RECORD_LINGER_MS = 250;
/** Tries to write a record of a charge already admitted (its request may have been answered). */
const RECORD_ATTEMPTS = 3;
const RECORD_BACKOFF_MS = 1_000;

interface Line {
  requests: number;
  micro: number;
  last_at: number;
}

/**
 * Credits set aside for one process: `micro` of them not yet recorded as spent, until `until`.
 * A lease given back (`returned`) keeps only what its holder admitted and has not recorded yet,
 * and goes once that is recorded.
 */
export interface Lease {
  micro: number;
  until: number;
  returned?: boolean;
}

/** Request credits of one organisation in one UTC month. */
export interface CreditsDoc {
  org: string;
  ym: number;
  /** Credits charged (leases not included). */
  micro: number;
  /** `<dataset id>|<type>` → the month's requests and credits. */
  per: Record<string, Line>;
  last_at: number;
  /** Lease id → its credits not yet spent. */
  leases?: Record<string, Lease>;
  /** The id of the write that left the document so. */
  write?: string;
}

/**
 * A change to a month's credits. `charge` decides against the limit on the counter itself (a
 * refund is a negative one, never refused); with `lease` it also asks for a block for this
 * process, and `returns` gives back what it did not admit of the one it held. `record` counts a
 * charge admitted from a lease, `return` gives back what a lease did not admit.
 */
export type CreditOp =
  | {
      kind: 'charge';
      c: RequestCharge;
      sign: 1 | -1;
      limitMicro?: number;
      lease?: string;
      returns?: Unused;
    }
  | { kind: 'record'; c: RequestCharge; lease: string }
  | ({ kind: 'return' } & Unused);

/** What a lease's holder did not admit (`unused` micro-credits): free again at once. */
export interface Unused {
  lease: string;
  unused: number;
}

export interface Outcome {
  ok: boolean;
  /** Refused, but leases of other processes hold enough: ms until the first of them ends. */
  held?: number;
  /** A block granted to this process. */
  block?: { id: string } & Lease;
}

/** A lease as its holder keeps it, for the package (`limit`) it was granted under. */
interface Held {
  id: string;
  limit: number;
  left: number;
  until: number;
  idle: NodeJS.Timeout;
}

const keyOf = (c: RequestCharge): string => `${c.org}:${ym(c.at)}`;
const receiptOf = (c: RequestCharge, leased = false): ChargeReceipt => ({
  id: crypto.randomUUID(),
  charge: c,
  ...(leased ? { leased } : {}),
});

/**
 * Request credits in Elasticsearch, exact across any number of processes (contract §8, §12).
 *
 * One document per organisation and month holds the total and the per-dataset, per-type lines;
 * every change is a versioned read-modify-write, so a decision against a fixed package and its
 * charge are one step on every host. Charges decided on the counter go one write at a time per
 * process: requests arriving meanwhile go together in the next (group commit), admitted in
 * arrival order while credits remain; records (below) have a group commit of their own. A
 * process reads the document again only after another write landed since its own.
 *
 * Leases take that write out of a request's path. A charge against a fixed package that is
 * admitted on the counter also sets aside a block of credits for this process: at most 1/16 of
 * those still free and 256 requests' worth, so blocks shrink to nothing as the package runs low
 * and the last credits are charged one by one. The next requests are admitted from the block
 * here and recorded after, in group commits nobody waits on (a usage report may lag by a
 * linger and a write; no 402 is decided while a record is on its way, since the credits it
 * counts are still set aside in its lease). Nothing is ever admitted beyond
 * the package: a block's credits leave the free ones when it is granted. A block unused for
 * IDLE_RETURN_MS goes back; a crashed holder's is free again LEASE_TTL_MS after it was taken.
 * A charge refused while other processes' leases hold enough waits for them to come back
 * (HELD_WAIT_MS) and then answers 503, never a 402 for credits not truly spent.
 */
export class EsCreditCounter {
  private readonly counters = new KeyedGroupCommit(
    (key: string, ops: CreditOp[]) => this.apply(key, ops),
    Infinity,
  );
  /** Records of charges admitted from leases: their own group commit, lingering. */
  private readonly records = new KeyedGroupCommit(
    (key: string, ops: CreditOp[]) => this.apply(key, ops),
    Infinity,
    10_000,
    RECORD_LINGER_MS,
  );
  /** Each counter as this process last wrote it: the next write usually needs no read. */
  private readonly lastWritten = new Map<string, Versioned<CreditsDoc>>();
  /** This process's lease on each counter. */
  private readonly held = new Map<string, Held>();
  /** Counters a block has been asked of and not yet answered: one ask at a time. */
  private readonly asking = new Set<string>();
  /** Leases being given back. */
  private readonly returning = new Set<Promise<void>>();
  /** Each receipt recorded after its answer, and its record on the way. */
  private readonly recording = new WeakMap<ChargeReceipt, Promise<void>>();

  constructor(private readonly indices: EsIndices) {}

  private get client() {
    return this.indices.client;
  }

  async charge(
    c: RequestCharge,
    limitMicro: number | undefined,
  ): Promise<ChargeReceipt | undefined> {
    if (limitMicro === undefined) {
      const out = await this.counters.submit(keyOf(c), { kind: 'charge', c, sign: 1 });
      return out.ok ? receiptOf(c) : undefined;
    }
    const admitted = await this.admit(c, limitMicro);
    if (!admitted) return undefined;
    await admitted.recorded;
    return admitted.receipt;
  }

  async admit(c: RequestCharge, limitMicro: number | undefined): Promise<Admission | undefined> {
    const key = keyOf(c);
    // Nothing to decide: recorded with the other records, after the answer, like a leased one.
    if (limitMicro === undefined) return this.recorded(key, { kind: 'charge', c, sign: 1 });
    const deadline = Date.now() + HELD_WAIT_MS;
    for (;;) {
      const h = this.held.get(key);
      // a lease of another package (the plan changed) is not used: the counter decides again
      if (
        h &&
        h.limit === limitMicro &&
        h.left >= c.micro &&
        Date.now() < h.until - LEASE_MARGIN_MS
      ) {
        h.left -= c.micro;
        h.idle.refresh();
        return this.recorded(key, { kind: 'record', c, lease: h.id });
      }
      // what is left of the lease (too little, or ending) goes back in the same write
      if (h) this.forget(key, h);
      const ask = !this.asking.has(key);
      if (ask) this.asking.add(key);
      const out = await this.counters
        .submit(key, {
          kind: 'charge',
          c,
          sign: 1,
          limitMicro,
          ...(ask ? { lease: crypto.randomUUID() } : {}),
          ...(h ? { returns: { lease: h.id, unused: h.left } } : {}),
        })
        .finally(() => {
          if (ask) this.asking.delete(key);
        });
      if (out.block) this.keep(key, out.block, limitMicro);
      if (out.ok) return { receipt: receiptOf(c), recorded: Promise.resolve() };
      if (out.held === undefined) return undefined;
      if (Date.now() >= deadline)
        throw unavailable(
          'credits of the package are held by another API process that has not given them back yet; try again',
          Math.max(1, Math.ceil(out.held / 1000)),
        );
      await new Promise((r) => setTimeout(r, HELD_RETRY_MS));
    }
  }

  /**
   * Records a charge admitted without a round trip (from a lease, or with no limit), trying
   * again through a short outage: its request may have been answered already, and a record
   * lost is a request not billed.
   */
  private async record(key: string, op: CreditOp): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.records.submit(key, op);
        return;
      } catch (e) {
        if (attempt >= RECORD_ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, RECORD_BACKOFF_MS * attempt));
      }
    }
  }

  /** An admission whose charge is recorded after it, by `op`. */
  private recorded(key: string, op: CreditOp & { c: RequestCharge }): Admission {
    const receipt = receiptOf(op.c, true);
    const recorded = this.record(key, op);
    this.recording.set(receipt, recorded);
    return { receipt, recorded };
  }

  /**
   * A charge recorded after its answer is refunded once its record has landed, with the same
   * retries, and not at all when the record never did: the refund can never land first.
   */
  async refund(receipt: ChargeReceipt): Promise<void> {
    const key = keyOf(receipt.charge);
    const op: CreditOp = { kind: 'charge', c: receipt.charge, sign: -1 };
    if (!receipt.leased) {
      await this.counters.submit(key, op);
      return;
    }
    const landed = await (this.recording.get(receipt) ?? Promise.resolve()).then(
      () => true,
      () => false,
    );
    if (landed) await this.record(key, op);
  }

  /** Gives back every lease this process holds, and waits for those on their way (shutdown). */
  async close(): Promise<void> {
    for (const [key, h] of [...this.held]) this.giveBack(key, h);
    await Promise.all([...this.returning]);
  }

  private keep(key: string, block: { id: string } & Lease, limit: number): void {
    const had = this.held.get(key);
    if (had) this.giveBack(key, had);
    const h: Held = {
      id: block.id,
      limit,
      left: block.micro,
      until: block.until,
      idle: setTimeout(() => {
        if (this.held.get(key) === h) this.giveBack(key, h);
      }, IDLE_RETURN_MS).unref(),
    };
    this.held.set(key, h);
  }

  private forget(key: string, h: Held): void {
    clearTimeout(h.idle);
    if (this.held.get(key) === h) this.held.delete(key);
  }

  /** Returns a lease in the background; one not returned ends with LEASE_TTL_MS anyway. */
  private giveBack(key: string, h: Held): void {
    this.forget(key, h);
    const p = this.counters.submit(key, { kind: 'return', lease: h.id, unused: h.left }).then(
      () => undefined,
      () => undefined,
    );
    this.returning.add(p);
    void p.finally(() => this.returning.delete(p));
  }

  private async apply(key: string, ops: CreditOp[]): Promise<Outcome[]> {
    let outcomes: Outcome[] = [];
    const known = this.lastWritten.get(key);
    const { version } = await casUpdate<CreditsDoc>(
      this.client,
      this.indices.shared('credits'),
      key,
      (cur) => {
        const change = applyOps(cur, ops, Date.now());
        outcomes = change.outcomes;
        // an id of this write's own, so a write whose answer was lost is recognised (casUpdate)
        return change.doc && { ...change.doc, write: crypto.randomUUID() };
      },
      { what: 'the credit counter', unique: true, ...(known ? { known } : {}) },
    );
    if (this.lastWritten.size > 10_000) this.lastWritten.clear();
    // two queues write here: a slower write must not put back an older version
    const had = this.lastWritten.get(key);
    if (!version) this.lastWritten.delete(key);
    else if (!had || had.primaryTerm !== version.primaryTerm || had.seqNo < version.seqNo)
      this.lastWritten.set(key, version);
    return outcomes;
  }

  async month(org: string, year: number, month: number): Promise<MonthUsage> {
    const cur = await getVersioned<CreditsDoc>(
      this.client,
      this.indices.shared('credits'),
      `${org}:${year * 100 + month}`,
    );
    const lines = Object.entries(cur?.doc.per ?? {})
      .filter(([, l]) => l.requests > 0)
      .map(([k, l]) => {
        const cut = k.lastIndexOf('|');
        return { datasetId: k.slice(0, cut), type: k.slice(cut + 1) as RequestType, ...l };
      })
      // by dataset, then type (NUL sorts before any character of either)
      .map((l) => ({ ...l, order: `${l.datasetId}\u0000${l.type}` }))
      .sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
    const lastAt = lines.reduce<number | undefined>(
      (m, l) => (m === undefined || l.last_at > m ? l.last_at : m),
      undefined,
    );
    return {
      micro: cur?.doc.micro ?? 0,
      perDataset: lines.map((l) => ({
        datasetId: l.datasetId,
        type: l.type,
        requests: l.requests,
        micro: l.micro,
      })),
      ...(lastAt !== undefined ? { lastAt } : {}),
    };
  }
}

/** Credits a new block sets aside: none once a sixteenth of those free is less than `need`. */
const blockFor = (free: number, need: number): number =>
  need > 0 ? Math.min(Math.floor(free / BLOCK_SHARE / need), MAX_BLOCK_REQUESTS) * need : 0;

/**
 * A batch of changes on the counter as read: the document to write (undefined: nothing to
 * write) and each change's outcome. Leases past their end are dropped first; a block is
 * granted at most once per batch, after every charge in it.
 */
export function applyOps(
  cur: CreditsDoc | undefined,
  ops: CreditOp[],
  now: number,
): { doc: CreditsDoc | undefined; outcomes: Outcome[] } {
  const first = ops.find((op) => op.kind !== 'return');
  if (!cur && !first) return { doc: undefined, outcomes: ops.map(() => ({ ok: true })) };
  const doc: CreditsDoc = cur
    ? { ...cur, per: { ...cur.per }, leases: { ...cur.leases } }
    : { org: first!.c.org, ym: ym(first!.c.at), micro: 0, per: {}, last_at: 0, leases: {} };
  const leases = doc.leases!;
  let changed = false;
  for (const [id, l] of Object.entries(leases))
    if (l.until <= now) {
      delete leases[id];
      changed = true;
    }
  /** Frees what the holder did not admit; the rest goes as its records arrive. */
  const giveBack = (r: Unused | undefined) => {
    const l = r && leases[r.lease];
    if (!l) return;
    const rest = l.micro - r.unused;
    if (rest > 0) leases[r.lease] = { ...l, micro: rest, returned: true };
    else delete leases[r.lease];
    changed = true;
  };
  const leased = () => Object.values(leases).reduce((n, l) => n + l.micro, 0);
  const count = (c: RequestCharge, sign: 1 | -1) => {
    const delta = sign * c.micro;
    doc.micro += delta;
    const lineKey = `${c.datasetId}|${c.type}`;
    const line = doc.per[lineKey] ?? { requests: 0, micro: 0, last_at: 0 };
    doc.per[lineKey] = {
      requests: line.requests + sign,
      micro: line.micro + delta,
      last_at: sign > 0 ? Math.max(line.last_at, c.at) : line.last_at,
    };
    if (sign > 0) doc.last_at = Math.max(doc.last_at, c.at);
    changed = true;
  };
  let grant: { id: string; limit: number; need: number; at: number } | undefined;
  const outcomes = ops.map((op, at): Outcome => {
    if (op.kind === 'return') {
      giveBack(op);
      return { ok: true };
    }
    if (op.kind === 'record') {
      count(op.c, 1);
      const l = leases[op.lease];
      // a lease already ended gave its credits back whole; this one is counted all the same
      if (l) {
        const rest = Math.max(0, l.micro - op.c.micro);
        if (rest === 0 && l.returned) delete leases[op.lease];
        else leases[op.lease] = { ...l, micro: rest };
      }
      return { ok: true };
    }
    giveBack(op.returns);
    if (op.sign > 0 && op.limitMicro !== undefined) {
      const free = op.limitMicro - doc.micro - leased();
      if (op.c.micro > free) {
        const ends = Object.values(leases).filter((l) => l.micro > 0);
        return op.c.micro <= free + leased() && ends.length
          ? { ok: false, held: Math.min(...ends.map((l) => l.until)) - now }
          : { ok: false };
      }
      if (op.lease && !grant) grant = { id: op.lease, limit: op.limitMicro, need: op.c.micro, at };
    }
    count(op.c, op.sign);
    return { ok: true };
  });
  if (grant) {
    const micro = blockFor(grant.limit - doc.micro - leased(), grant.need);
    if (micro > 0) {
      const lease = { micro, until: now + LEASE_TTL_MS };
      leases[grant.id] = lease;
      outcomes[grant.at] = { ...outcomes[grant.at]!, block: { id: grant.id, ...lease } };
      changed = true;
    }
  }
  if (!Object.keys(leases).length) delete doc.leases;
  return { doc: changed ? doc : undefined, outcomes };
}
