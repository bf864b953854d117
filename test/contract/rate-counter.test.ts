/**
 * The per-key rate counter (RateCounter, contract §16 `rate`) on every engine, built as the
 * composition root builds it (embeddedPorts, esPorts). Time is passed in, never slept through.
 * With Elasticsearch two hosts (two clients, two counters) take from one key at once and must
 * admit exactly `limit` together; the embedded engine is one process, so its cases use one host.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { RateAdmission, RateCounter } from '../../src/ports/rate-counter';
import { tempDir, waitFor } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const MINUTE = 60_000;
/** The start of a UTC minute. */
const T = Date.UTC(2026, 5, 10, 12, 0);

interface Rig {
  a: RateCounter;
  /** Another host of the same installation (Elasticsearch only). */
  b?: RateCounter;
  /** How many windows that began before `before` the installation still holds. */
  windowsBefore(before: number): Promise<number>;
  close(): Promise<void>;
}

const rigs = tierOf<() => Promise<Rig>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-rates-');
      const db = openDb(path.join(dir, 'store.db'));
      const { rates } = embeddedPorts(db, dir);
      return {
        a: rates,
        async windowsBefore(before) {
          const { windows } = rates as unknown as { windows: Map<number, unknown> };
          return [...windows.keys()].filter((w) => w < before).length;
        },
        close: async () => {
          db.close();
        },
      };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients: Client[] = [esClient(ES_URL), esClient(ES_URL)];
      const [ia, ib] = clients.map((c) => new EsIndices(c, prefix, { shards: 1, replicas: 0 }));
      await ia!.ensureShared();
      const index = ia!.shared('rates');
      return {
        a: esPorts(ia!, { vectorDims: 8 }).rates,
        b: esPorts(ib!, { vectorDims: 8 }).rates,
        async windowsBefore(before) {
          await clients[0]!.indices.refresh({ index });
          const r = await clients[0]!.count({
            index,
            query: { range: { window: { lt: before } } },
          });
          return r.count;
        },
        async close() {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

const admittedOf = (rs: RateAdmission[]) => rs.filter((r) => r.admitted).length;

describe.each(rigs)('RateCounter on %s', (name, open) => {
  let rig: Rig;
  beforeEach(async () => {
    rig = await open();
  });
  afterEach(() => rig.close());

  test('of many concurrent takes of one key exactly `limit` are admitted', async () => {
    const rs = await Promise.all(
      Array.from({ length: 40 }, (_, i) => rig.a.take('tok', 7, T + 1_000 + i)),
    );
    expect(admittedOf(rs)).toBe(7);
    for (const r of rs.filter((x) => !x.admitted)) expect(r.retryAfterS).toBe(59);
    for (const r of rs.filter((x) => x.admitted)) expect(r.retryAfterS).toBe(0);
    // the window stays spent for later requests too
    expect(await rig.a.take('tok', 7, T + 30_000)).toEqual({ admitted: false, retryAfterS: 30 });
  });

  test('requests one after another are admitted up to the limit, then refused', async () => {
    const rs: RateAdmission[] = [];
    for (let i = 0; i < 5; i++) rs.push(await rig.a.take('seq', 3, T + i * 1_000));
    expect(rs.map((r) => r.admitted)).toEqual([true, true, true, false, false]);
  });

  test('a new window admits again; windows are aligned to the UTC minute', async () => {
    const late = T + MINUTE - 1;
    expect(admittedOf(await Promise.all([1, 2, 3].map(() => rig.a.take('w', 2, late))))).toBe(2);
    expect(await rig.a.take('w', 2, late)).toEqual({ admitted: false, retryAfterS: 1 });
    // the next minute starts exactly at its edge, not 60 s after the first request
    const next = await Promise.all([1, 2, 3].map(() => rig.a.take('w', 2, T + MINUTE)));
    expect(admittedOf(next)).toBe(2);
    expect(next.find((r) => !r.admitted)).toEqual({ admitted: false, retryAfterS: 60 });
    expect((await rig.a.take('w', 2, T + 2 * MINUTE + 5_000)).admitted).toBe(true);
  });

  test('Retry-After is the rest of the window in whole seconds, within (0, 60]', async () => {
    await rig.a.take('r', 1, T);
    const at = [0, 1, 500, 999, 1_000, 1_001, 30_000, 58_999, 59_000, 59_001, 59_999];
    const rs = await Promise.all(at.map((ms) => rig.a.take('r', 1, T + ms)));
    expect(rs.map((r) => r.retryAfterS)).toEqual([60, 60, 60, 60, 59, 59, 30, 2, 1, 1, 1]);
    for (const r of rs) {
      expect(r.admitted).toBe(false);
      expect(r.retryAfterS).toBeGreaterThan(0);
      expect(r.retryAfterS).toBeLessThanOrEqual(60);
    }
  });

  test('keys are counted apart, each against its own limit', async () => {
    const takes = ['x', 'y', 'z'].flatMap((key, k) =>
      Array.from({ length: 10 }, () => rig.a.take(key, k + 2, T + 10_000).then((r) => [key, r])),
    );
    const rs = (await Promise.all(takes)) as Array<[string, RateAdmission]>;
    const per = (key: string) => admittedOf(rs.filter(([k]) => k === key).map(([, r]) => r));
    expect([per('x'), per('y'), per('z')]).toEqual([2, 3, 4]);
    expect((await rig.a.take('x\u0000', 1, T + 10_000)).admitted).toBe(true);
    // a key of any length (Elasticsearch names a document by at most 512 bytes)
    const long = 'k'.repeat(2_000);
    expect((await rig.a.take(long, 1, T + 10_000)).admitted).toBe(true);
    expect((await rig.a.take(long, 1, T + 10_000)).admitted).toBe(false);
    expect((await rig.a.take(`${long}2`, 1, T + 10_000)).admitted).toBe(true);
  });

  test('past windows are not kept for ever', async () => {
    for (let m = 0; m < 15; m++) await rig.a.take('old', 1, T + m * MINUTE);
    // (Elasticsearch) the sweep deletes what searches see: the windows just written, refreshed
    await rig.windowsBefore(T + 15 * MINUTE);
    await rig.a.take('old', 1, T + 30 * MINUTE);
    // the sweep is not awaited by the take that starts it
    await waitFor(
      'past windows to be dropped',
      async () => (await rig.windowsBefore(T + 15 * MINUTE)) === 0,
    );
    // the current window is kept: it stays spent
    expect((await rig.a.take('old', 1, T + 30 * MINUTE)).admitted).toBe(false);
  });

  if (name === 'Elasticsearch') {
    const two = () => [rig.a, rig.b!] as const;

    test('two hosts taking 3 × limit at once admit exactly limit together', async () => {
      const [a, b] = two();
      for (const limit of [1, 5, 25]) {
        const now = T + limit * MINUTE + 2_000;
        const rs = await Promise.all(
          Array.from({ length: 3 * limit }, (_, i) => (i % 2 ? a : b).take('hot', limit, now)),
        );
        expect([limit, admittedOf(rs)]).toEqual([limit, limit]);
        for (const r of rs.filter((x) => !x.admitted)) expect(r.retryAfterS).toBe(58);
        // and neither host admits one more in that window
        const after = await Promise.all([a.take('hot', limit, now), b.take('hot', limit, now)]);
        expect(admittedOf(after)).toBe(0);
      }
    });

    test('a host sees what the other admitted since its own last write', async () => {
      const [a, b] = two();
      expect(admittedOf(await Promise.all([1, 2, 3].map(() => a.take('k', 5, T))))).toBe(3);
      expect((await b.take('k', 5, T + 1)).admitted).toBe(true);
      // a's remembered version is stale now: its write conflicts and is decided on a fresh read
      expect(admittedOf(await Promise.all([1, 2].map(() => a.take('k', 5, T + 2))))).toBe(1);
      expect((await b.take('k', 5, T + 3)).admitted).toBe(false);
    });
  }
});
