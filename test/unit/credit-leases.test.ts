/**
 * The Elasticsearch credit counter's changes (applyOps), without Elasticsearch: blocks set
 * aside for a process shrink as the package runs low, records spend them, ended and returned
 * leases give their rest back, and a charge refused while other leases hold enough says so.
 */
import {
  LEASE_TTL_MS,
  applyOps,
  type CreditOp,
  type CreditsDoc,
  type Unused,
} from '../../src/adapters/elasticsearch/es-credit-counter';

const M = 1_000_000;
const NOW = Date.UTC(2026, 5, 10);
const c = (micro = M) => ({ org: 'o', datasetId: 'd', type: 'search' as const, micro, at: NOW });
const charge = (limit: number, lease?: string, returns?: Unused): CreditOp => ({
  kind: 'charge',
  c: c(),
  sign: 1,
  limitMicro: limit,
  ...(lease ? { lease } : {}),
  ...(returns ? { returns } : {}),
});
const doc = (micro: number, leases: CreditsDoc['leases'] = {}): CreditsDoc => ({
  org: 'o',
  ym: 202606,
  micro,
  per: {},
  last_at: 0,
  leases,
});

test('a block is a sixteenth of the credits free after the charge, at most 256 requests, none when small', () => {
  const big = applyOps(doc(0), [charge(100_000 * M, 'x')], NOW);
  expect(big.outcomes[0]).toMatchObject({ ok: true, block: { id: 'x', micro: 256 * M } });
  expect(big.doc!.leases!.x).toEqual({ micro: 256 * M, until: NOW + LEASE_TTL_MS });
  const mid = applyOps(doc(0), [charge(1000 * M, 'x')], NOW);
  // 999 free after the charge: 62 requests' worth
  expect(mid.outcomes[0]!.block!.micro).toBe(62 * M);
  const small = applyOps(doc(0), [charge(16 * M, 'x')], NOW);
  expect(small.outcomes[0]).toEqual({ ok: true });
  expect(small.doc!.leases).toBeUndefined();
  expect(small.doc!.micro).toBe(M);
});

test('one block per batch, after every charge in it; leases count against the package', () => {
  const r = applyOps(
    doc(0, { other: { micro: 900 * M, until: NOW + 1 } }),
    [charge(1000 * M, 'a'), charge(1000 * M, 'b')],
    NOW,
  );
  expect(r.outcomes.map((o) => o.ok)).toEqual([true, true]);
  // 1000 − 2 charged − 900 leased = 98 free: a block of 6
  expect(r.outcomes[0]!.block!.micro).toBe(6 * M);
  expect(r.outcomes[1]!.block).toBeUndefined();
});

test('a record spends its lease and counts; an ended lease gives its rest back', () => {
  const r = applyOps(
    doc(10 * M, { mine: { micro: 5 * M, until: NOW + 1 } }),
    [{ kind: 'record', c: c(), lease: 'mine' }],
    NOW,
  );
  expect(r.doc!.micro).toBe(11 * M);
  expect(r.doc!.leases!.mine!.micro).toBe(4 * M);
  expect(r.doc!.per['d|search']).toMatchObject({ requests: 1, micro: M });
  // the lease has ended: the record still counts, and the rest is free again
  const late = applyOps(
    doc(10 * M, { mine: { micro: 5 * M, until: NOW } }),
    [{ kind: 'record', c: c(), lease: 'mine' }, charge(16 * M)],
    NOW,
  );
  expect(late.doc!.leases).toBeUndefined();
  expect(late.doc!.micro).toBe(12 * M);
});

test('refused while other leases hold enough: held, with the time until the first ends', () => {
  const leases = { a: { micro: 2 * M, until: NOW + 4000 }, b: { micro: M, until: NOW + 9000 } };
  const r = applyOps(doc(17 * M, leases), [charge(20 * M)], NOW);
  expect(r.outcomes[0]).toEqual({ ok: false, held: 4000 });
  expect(r.doc).toBeUndefined();
  // more than every lease holds: truly spent
  const spent = applyOps(
    doc(19 * M, { a: { micro: M, until: NOW + 4000 } }),
    [{ kind: 'charge', c: c(2 * M), sign: 1, limitMicro: 20 * M }],
    NOW,
  );
  expect(spent.outcomes[0]).toEqual({ ok: false });
});

test('a charge gives back what its process did not admit of its lease first, and may spend it', () => {
  const r = applyOps(
    doc(19 * M, { mine: { micro: M, until: NOW + 9000 } }),
    [charge(20 * M, 'next', { lease: 'mine', unused: M })],
    NOW,
  );
  expect(r.outcomes[0]!.ok).toBe(true);
  expect(r.doc!.micro).toBe(20 * M);
  expect(r.doc!.leases).toBeUndefined();
  const back = applyOps(
    doc(0, { mine: { micro: M, until: NOW + 9000 } }),
    [{ kind: 'return', lease: 'mine', unused: M }],
    NOW,
  );
  expect(back.doc!.leases).toBeUndefined();
  expect(applyOps(undefined, [{ kind: 'return', lease: 'x', unused: 0 }], NOW).doc).toBeUndefined();
});

test('a lease given back keeps what was admitted and not yet recorded, until it is', () => {
  const limit = 20 * M;
  // 5 set aside, 3 of them never admitted: 2 admitted whose records are still on their way
  const back = applyOps(
    doc(10 * M, { mine: { micro: 5 * M, until: NOW + 9000 } }),
    [{ kind: 'return', lease: 'mine', unused: 3 * M }],
    NOW,
  ).doc!;
  expect(back.leases!.mine).toEqual({ micro: 2 * M, until: NOW + 9000, returned: true });
  // 8 free, not 10: the two admitted still count against the package
  const nine = Array.from({ length: 9 }, () => charge(limit));
  expect(applyOps(back, nine, NOW).outcomes.filter((o) => o.ok)).toHaveLength(8);
  const recorded = applyOps(
    back,
    [
      { kind: 'record', c: c(), lease: 'mine' },
      { kind: 'record', c: c(), lease: 'mine' },
    ],
    NOW,
  ).doc!;
  expect(recorded.leases).toBeUndefined();
  expect(recorded.micro).toBe(12 * M);
});

test('refunds are never refused and give credits back to the package', () => {
  const r = applyOps(doc(20 * M), [{ kind: 'charge', c: c(), sign: -1 }, charge(20 * M)], NOW);
  expect(r.outcomes.map((o) => o.ok)).toEqual([true, true]);
  expect(r.doc!.micro).toBe(20 * M);
});
