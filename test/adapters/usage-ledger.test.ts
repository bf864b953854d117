import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { SqliteUsageLedger } from '../../src/adapters/embedded/usage-ledger';
import { RESERVATION_TTL_MS } from '../../src/ports/usage-ledger';
import { tempDir } from '../helpers/app';

let db: Db;
let ledger: SqliteUsageLedger;
beforeEach(() => {
  db = openDb(path.join(tempDir('vss-ledger-'), 'store.db'));
  ledger = new SqliteUsageLedger(db);
});
afterEach(() => db.close());

const at = (iso: string): number => Date.parse(iso);
const charge = (iso: string, micro = 1_000_000, limit?: number) =>
  ledger.charge({ org: 'o', datasetId: 'd', type: 'search', micro, at: at(iso) }, limit);

test('months are UTC calendar months', async () => {
  await charge('2026-01-31T23:59:59.999Z');
  await charge('2026-02-01T00:00:00.000Z');
  await charge('2026-02-28T23:59:59.999Z');
  expect((await ledger.month('o', 2026, 1)).micro).toBe(1_000_000);
  const feb = await ledger.month('o', 2026, 2);
  expect(feb.micro).toBe(2_000_000);
  expect(feb.lastAt).toBe(at('2026-02-28T23:59:59.999Z'));
  expect((await ledger.month('o', 2026, 3)).micro).toBe(0);
});

test('a fixed package resets with the month and refunds give credit back', async () => {
  const limit = 2_000_000;
  expect(await charge('2026-03-31T12:00:00Z', 1_500_000, limit)).toEqual(expect.any(Number));
  expect(await charge('2026-03-31T12:00:01Z', 1_000_000, limit)).toBeUndefined();
  const small = await charge('2026-03-31T12:00:02Z', 500_000, limit);
  expect(small).toEqual(expect.any(Number));
  await ledger.refund(small!);
  expect((await ledger.month('o', 2026, 3)).perDataset).toEqual([
    { datasetId: 'd', type: 'search', requests: 1, micro: 1_500_000 },
  ]);
  expect(await charge('2026-04-01T00:00:00Z', 2_000_000, limit)).toEqual(expect.any(Number));
});

test('fractional multipliers add up exactly against the limit', async () => {
  const tenth = 100_000;
  for (let i = 0; i < 10; i++)
    expect(await charge('2026-05-01T00:00:00Z', tenth, 1_000_000)).toBeDefined();
  expect(await charge('2026-05-01T00:00:00Z', tenth, 1_000_000)).toBeUndefined();
});

test('images count per UTC year, once per (dataset, item, url)', async () => {
  const img = (item: string, url: string, iso: string) =>
    ledger.recordImage({ org: 'o', datasetId: 'd', itemId: item, url, at: at(iso) });
  await img('a', 'u1', '2025-12-31T23:59:59.999Z');
  await img('a', 'u1', '2026-01-01T00:00:01Z'); // a redelivery of the same processing
  await img('a', 'u2', '2026-01-01T00:00:00Z');
  await img('b', 'u2', '2026-06-01T00:00:00Z');
  expect(await ledger.images('o', 2025)).toEqual({
    processed: 1,
    lastAt: at('2025-12-31T23:59:59.999Z'),
  });
  expect((await ledger.images('o', 2026)).processed).toBe(2);
  expect((await ledger.images('other', 2026)).processed).toBe(0);
});

test('image reservations hold places in a fixed limit; released or stale ones give them back', async () => {
  const t0 = at('2026-07-01T00:00:00Z');
  const key = (item: string) => ({ org: 'o', datasetId: 'd', itemId: item, url: `u-${item}` });
  expect(await ledger.reserveImage({ ...key('a'), at: t0 }, 2)).toBe(true);
  expect(await ledger.reserveImage({ ...key('b'), at: t0 }, 2)).toBe(true);
  expect(await ledger.reserveImage({ ...key('c'), at: t0 }, 2)).toBe(false);
  // a redelivered job keeps its own place
  expect(await ledger.reserveImage({ ...key('a'), at: t0 + 1 }, 2)).toBe(true);
  await ledger.releaseImage(key('b'));
  expect(await ledger.reserveImage({ ...key('c'), at: t0 + 2 }, 2)).toBe(true);
  await ledger.recordImage({ ...key('c'), at: t0 + 3 });
  await ledger.releaseImage(key('c')); // a counted image is never released
  expect((await ledger.images('o', 2026)).processed).toBe(1);
  // 'a' was never confirmed (its worker died): after the TTL its place is free again
  const later = t0 + RESERVATION_TTL_MS + 10;
  expect(await ledger.reserveImage({ ...key('d'), at: later }, 2)).toBe(true);
  expect(await ledger.reserveImage({ ...key('e'), at: later }, 2)).toBe(false);
});

test('concurrent image events share one commit, each settles once stored, and a failed commit fails them all', async () => {
  const ev = (item: string) => ({
    org: 'o',
    datasetId: 'd',
    itemId: item,
    url: `u-${item}`,
    at: at('2026-07-01T00:00:00Z'),
  });
  const original = db.transaction.bind(db);
  let transactions = 0;
  db.transaction = ((fn: Parameters<Db['transaction']>[0]) => {
    transactions++;
    return original(fn);
  }) as Db['transaction'];
  const calls = [...Array.from({ length: 20 }, (_, i) => ev(`i${i}`)), ev('i3'), ev('i3')];
  await Promise.all(calls.map((c) => ledger.recordImage(c)));
  db.transaction = original;
  expect(transactions).toBe(1);
  expect((await ledger.images('o', 2026)).processed).toBe(20); // the repeats counted once

  db.close(); // the store goes away: every waiting event is refused, none silently dropped
  const failed = await Promise.allSettled([
    ledger.recordImage(ev('x')),
    ledger.recordImage(ev('y')),
  ]);
  expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  db = openDb(path.join(tempDir('vss-ledger-'), 'store.db')); // for afterEach
});
