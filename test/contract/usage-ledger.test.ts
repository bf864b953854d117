/**
 * One set of cases for every UsageLedger and EventLog adapter. Where it matters, two hosts of
 * one installation charge and count at once: limits must hold exactly across them.
 */
import { RESERVATION_TTL_MS, type ChargeReceipt } from '../../src/ports/usage-ledger';
import { waitFor } from '../helpers/app';
import { ENGINES, twoHosts, type Host } from './engines';

const at = (iso: string): number => Date.parse(iso);

describe.each(ENGINES)('UsageLedger and EventLog on %s', (_name, open) => {
  const hosts = twoHosts(open);
  let a: Host;
  let b: Host;
  beforeEach(() => ({ a, b } = hosts));

  const charge = (h: Host, iso: string, micro = 1_000_000, limit?: number, org = 'o') =>
    h.ledger.charge({ org, datasetId: 'd', type: 'search', micro, at: at(iso) }, limit);

  test('months are UTC calendar months', async () => {
    await charge(a, '2026-01-31T23:59:59.999Z');
    await charge(b, '2026-02-01T00:00:00.000Z');
    await charge(a, '2026-02-28T23:59:59.999Z');
    expect((await b.ledger.month('o', 2026, 1)).micro).toBe(1_000_000);
    const feb = await b.ledger.month('o', 2026, 2);
    expect(feb.micro).toBe(2_000_000);
    expect(feb.lastAt).toBe(at('2026-02-28T23:59:59.999Z'));
    expect((await a.ledger.month('o', 2026, 3)).micro).toBe(0);
  });

  test('a fixed package resets with the month and refunds give credit back', async () => {
    const limit = 2_000_000;
    expect(await charge(a, '2026-03-31T12:00:00Z', 1_500_000, limit)).toBeDefined();
    expect(await charge(b, '2026-03-31T12:00:01Z', 1_000_000, limit)).toBeUndefined();
    const small = await charge(b, '2026-03-31T12:00:02Z', 500_000, limit);
    expect(small).toBeDefined();
    await a.ledger.refund(small!);
    expect((await a.ledger.month('o', 2026, 3)).perDataset).toEqual([
      { datasetId: 'd', type: 'search', requests: 1, micro: 1_500_000 },
    ]);
    expect(await charge(a, '2026-04-01T00:00:00Z', 2_000_000, limit)).toBeDefined();
  });

  test('fractional multipliers add up exactly against the limit', async () => {
    const tenth = 100_000;
    for (let i = 0; i < 10; i++)
      expect(await charge(i % 2 ? a : b, '2026-05-01T00:00:00Z', tenth, 1_000_000)).toBeDefined();
    expect(await charge(a, '2026-05-01T00:00:00Z', tenth, 1_000_000)).toBeUndefined();
  });

  test('a package of R credits admits exactly R of many concurrent requests spread over two hosts', async () => {
    const R = 25;
    const results = await Promise.all(
      Array.from({ length: 80 }, (_, i) =>
        charge(i % 2 ? a : b, '2026-06-10T00:00:00Z', 1_000_000, R * 1_000_000),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(R);
    const june = await a.ledger.month('o', 2026, 6);
    expect(june.micro).toBe(R * 1_000_000);
    expect(june.perDataset).toEqual([
      { datasetId: 'd', type: 'search', requests: R, micro: R * 1_000_000 },
    ]);
    // refunds from both hosts at once give back exactly what they took
    const admitted = results.filter(Boolean) as ChargeReceipt[];
    await Promise.all(admitted.slice(0, 10).map((r, i) => (i % 2 ? a : b).ledger.refund(r)));
    expect((await b.ledger.month('o', 2026, 6)).micro).toBe((R - 10) * 1_000_000);
    const again = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        charge(i % 2 ? a : b, '2026-06-11T00:00:00Z', 1_000_000, R * 1_000_000),
      ),
    );
    expect(again.filter(Boolean)).toHaveLength(10);
  });

  test('without a limit every admission is taken, recorded exactly, and refunds follow their charge', async () => {
    const c = (i: number) => ({
      org: 'u',
      datasetId: 'd',
      type: 'search' as const,
      micro: 1_000_000,
      at: at('2026-08-01T00:00:00Z') + i,
    });
    const admitted = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).ledger.admit(c(i), undefined)),
    );
    expect(admitted.every(Boolean)).toBe(true);
    // a refund asked before its charge is recorded still takes it back, on either host
    await Promise.all(
      admitted.slice(0, 6).map((x, i) => (i % 2 ? a : b).ledger.refund(x!.receipt)),
    );
    await Promise.all(admitted.map((x) => x!.recorded));
    const aug = await a.ledger.month('u', 2026, 8);
    expect(aug.perDataset).toEqual([
      { datasetId: 'd', type: 'search', requests: 54, micro: 54_000_000 },
    ]);
    expect(aug.lastAt).toBe(at('2026-08-01T00:00:00Z') + 59);
  });

  test('organisations and request types are counted apart', async () => {
    await charge(a, '2026-07-01T00:00:00Z', 1_000_000, undefined, 'x');
    await b.ledger.charge(
      { org: 'x', datasetId: 'd2', type: 'lens', micro: 2_000_000, at: at('2026-07-02T00:00:00Z') },
      undefined,
    );
    await charge(b, '2026-07-01T00:00:00Z', 1_000_000, undefined, 'y');
    const x = await a.ledger.month('x', 2026, 7);
    expect(x.micro).toBe(3_000_000);
    expect(x.perDataset).toEqual([
      { datasetId: 'd', type: 'search', requests: 1, micro: 1_000_000 },
      { datasetId: 'd2', type: 'lens', requests: 1, micro: 2_000_000 },
    ]);
    expect((await a.ledger.month('y', 2026, 7)).micro).toBe(1_000_000);
  });

  const img = (item: string, url: string, iso: string, processedAt = 1) => ({
    org: 'o',
    datasetId: 'd',
    itemId: item,
    url,
    at: at(iso),
    processedAt,
  });

  test('images count once per processing of an item url, per UTC year (contract §8)', async () => {
    await a.ledger.recordImage(img('a', 'u1', '2025-12-31T23:59:59.999Z'));
    await b.ledger.recordImage(img('a', 'u1', '2026-01-01T00:00:01Z')); // a redelivery
    await a.ledger.recordImage(img('a', 'u2', '2026-01-01T00:00:00Z', 2)); // url changed
    await b.ledger.recordImage(img('a', 'u1', '2026-01-02T00:00:00Z', 3)); // and back: A → B → A
    await a.ledger.recordImage(img('b', 'u2', '2026-06-01T00:00:00Z'));
    expect(await b.ledger.images('o', 2025)).toEqual({
      processed: 1,
      lastAt: at('2025-12-31T23:59:59.999Z'),
    });
    expect(await a.ledger.images('o', 2026)).toEqual({
      processed: 3,
      lastAt: at('2026-06-01T00:00:00Z'),
    });
    expect((await a.ledger.images('other', 2026)).processed).toBe(0);
  });

  test('image reservations hold places in a fixed limit; released or stale ones give them back', async () => {
    const t0 = at('2026-07-01T00:00:00Z');
    const key = (item: string, t = t0) => ({
      org: 'o',
      datasetId: 'd',
      itemId: item,
      url: `u-${item}`,
      at: t,
    });
    expect(await a.ledger.reserveImage(key('a'), 2)).toBe(true);
    expect(await b.ledger.reserveImage(key('b'), 2)).toBe(true);
    expect(await a.ledger.reserveImage(key('c'), 2)).toBe(false);
    // a redelivered job keeps its own place
    expect(await b.ledger.reserveImage(key('a', t0 + 1), 2)).toBe(true);
    await a.ledger.releaseImage(key('b'));
    expect(await b.ledger.reserveImage(key('c', t0 + 2), 2)).toBe(true);
    await a.ledger.recordImage({ ...key('c', t0 + 3), processedAt: t0 + 3 });
    await b.ledger.releaseImage(key('c', t0 + 2)); // a counted image stays counted
    expect((await a.ledger.images('o', 2026)).processed).toBe(1);
    // 'a' was never confirmed (its worker died): after the TTL its place is free again
    const later = t0 + RESERVATION_TTL_MS + 10;
    expect(await a.ledger.reserveImage(key('d', later), 2)).toBe(true);
    expect(await b.ledger.reserveImage(key('e', later), 2)).toBe(false);
  });

  test('a fixed image limit holds exactly under concurrent workers on two hosts', async () => {
    const t0 = at('2026-08-01T00:00:00Z');
    const limit = 7;
    const work = Array.from({ length: 24 }, async (_, i) => {
      const h = i % 2 ? a : b;
      const k = { org: 'o', datasetId: 'd', itemId: `i${i}`, url: `u${i}`, at: t0 + i };
      if (!(await h.ledger.reserveImage(k, limit))) return false;
      await h.ledger.recordImage({ ...k, processedAt: t0 + i });
      return true;
    });
    expect((await Promise.all(work)).filter(Boolean)).toHaveLength(limit);
    expect((await a.ledger.images('o', 2026)).processed).toBe(limit);
  });

  test('counts finished together (a group per write) are exact: each once, places freed', async () => {
    const t0 = at('2026-09-01T00:00:00Z');
    const limit = 12;
    const k = (i: number, org = 'g') => ({
      org,
      datasetId: `d-${org}`,
      itemId: `i${i}`,
      url: `u${i}`,
      at: t0 + i,
    });
    for (let i = 0; i < 10; i++) expect(await a.ledger.reserveImage(k(i), limit)).toBe(true);
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => a.ledger.recordImage({ ...k(i), processedAt: 5 })),
      // redeliveries of three of them, on the other host and on this one
      ...[0, 1, 2].map((i) => (i % 2 ? a : b).ledger.recordImage({ ...k(i), processedAt: 5 })),
      // another organisation's in the same moment
      ...[0, 1].map((i) => a.ledger.recordImage({ ...k(i, 'h'), processedAt: 5 })),
    ]);
    expect((await b.ledger.images('g', 2026)).processed).toBe(10);
    expect((await b.ledger.images('h', 2026)).processed).toBe(2);
    // the ten places were given back as counts: two are left, then none
    expect(await b.ledger.reserveImage(k(10), limit)).toBe(true);
    expect(await a.ledger.reserveImage(k(11), limit)).toBe(true);
    expect(await b.ledger.reserveImage(k(12), limit)).toBe(false);
  });

  test('the event log keeps requests with their v, per dataset, oldest first', async () => {
    const t0 = at('2026-09-01T00:00:00Z');
    await a.events.append([
      { org: 'o', datasetId: 'd', kind: 'request', type: 'search', at: t0 + 2, vars: { a: 'x' } },
      { org: 'o', datasetId: 'other', kind: 'request', type: 'search', at: t0 + 2 },
    ]);
    await b.events.append([
      { org: 'o', datasetId: 'd', kind: 'request', type: 'lens', at: t0 + 1 },
      { org: 'o', datasetId: 'd', kind: 'track', type: 'click', at: t0 + 10, vars: { id: 'i1' } },
    ]);
    const all = await waitFor('three events visible', async () => {
      const l = await b.events.list('d', { from: t0, to: t0 + 100 }, 10);
      return l.length >= 3 && l;
    });
    expect(all).toEqual([
      { org: 'o', datasetId: 'd', kind: 'request', type: 'lens', at: t0 + 1 },
      { org: 'o', datasetId: 'd', kind: 'request', type: 'search', at: t0 + 2, vars: { a: 'x' } },
      { org: 'o', datasetId: 'd', kind: 'track', type: 'click', at: t0 + 10, vars: { id: 'i1' } },
    ]);
    expect(await a.events.list('d', { from: t0 + 2, to: t0 + 10 }, 10)).toHaveLength(1);
    expect(await a.events.list('d', { from: t0, to: t0 + 100 }, 2)).toHaveLength(2);
  });
});
