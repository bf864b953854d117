/**
 * The popularity roll-up (ItemCountsRollup, contract §14) on every engine, played by two hosts
 * of one installation (two SQLite connections to one file, or two Elasticsearch clients on one
 * set of indices): one pass per interval whoever asks, absolute counts that a repeated pass
 * leaves as they are, updated_at untouched, the window's edge applied, and items written while
 * a pass runs keep both their new content and their counts.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import type { EnginePorts } from '../../src/adapters/engine-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import { LIMITS } from '../../src/domain/limits';
import type { LoggedEvent } from '../../src/ports/event-log';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const DIMS = 8;
const DS = 'ds-counts';
const T0 = Date.UTC(2026, 10, 1);
const PASS = LIMITS.popularityPassMs;
const WINDOW = LIMITS.popularityWindowMs;

interface Installation {
  a: EnginePorts;
  b: EnginePorts;
  /** Elasticsearch only: the indices, for a document written as an older release wrote it. */
  es?: { client: Client; indices: EsIndices };
  close(): Promise<void>;
}

const installations = tierOf<(now: () => number) => Promise<Installation>>({
  local: [
    'embedded (SQLite)',
    async () => {
      const dir = tempDir('vss-counts-');
      const dbs: Db[] = [openDb(path.join(dir, 'store.db')), openDb(path.join(dir, 'store.db'))];
      return {
        a: embeddedPorts(dbs[0]!, dir),
        b: embeddedPorts(dbs[1]!, dir),
        close: async () => dbs.forEach((db) => db.close()),
      };
    },
  ],
  services: [
    'Elasticsearch',
    async (now) => {
      const prefix = `p${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients = [esClient(ES_URL), esClient(ES_URL)];
      const [ia, ib] = clients.map((c) => new EsIndices(c, prefix, { shards: 1, replicas: 0 }));
      await ia!.ensureShared();
      await ia!.ensureItemTemplate(DIMS);
      return {
        a: esPorts(ia!, { vectorDims: DIMS, now }),
        b: esPorts(ib!, { vectorDims: DIMS, now }),
        es: { client: clients[0]!, indices: ia! },
        close: async () => {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await clients[0]!.indices
            .deleteIndexTemplate({ name: `${prefix}items` })
            .catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

const event = (id: string, at: number, action = 'click', qty?: number): LoggedEvent => ({
  org: 'acme',
  datasetId: DS,
  kind: 'track',
  type: action,
  at,
  vars: { a: action, id, ...(qty !== undefined ? { qty: String(qty) } : {}) },
});

describe.each(installations)('%s', (_name, open) => {
  let now = T0;
  let inst: Installation;
  beforeEach(async () => {
    now = T0;
    inst = await open(() => now);
  });
  afterEach(() => inst.close());

  const counts = async (ports: EnginePorts, ids: string[]) =>
    Object.fromEntries(
      (await ports.content.getItems(DS, ids, { latest: true })).map((i) => [
        i.id,
        [i.counts?.popularity ?? 0, i.counts?.purchases ?? 0, i.updatedAt],
      ]),
    );

  test('two hosts at once: one pass runs, and a repeated pass changes nothing', async () => {
    const { a, b } = inst;
    await a.content.applyWrites(
      DS,
      ['x', 'y', 'z'].map((id) => ({ id, url: `http://img/${id}.png`, metadata: { n: 1 } })),
      'post',
      T0,
    );
    await a.events.append([
      event('x', T0 - 1000),
      event('x', T0 - 2 * 86_400_000),
      event('y', T0 - 5000, 'purchase', 3),
      event('y', T0 - 6000, 'purchase'),
      event('y', T0 - 7000, 'view'),
    ]);
    await b.events.append([event('x', T0 - 3000), event('gone', T0 - 1000)]);
    now = T0 + 1000;
    const passes = await Promise.all([a.counts.rollUp(now), b.counts.rollUp(now)]);
    expect(passes.filter((p) => p !== undefined)).toHaveLength(1);
    expect(await counts(b, ['x', 'y', 'z'])).toEqual({
      x: [3, 0, T0],
      y: [0, 4, T0],
      z: [0, 0, T0],
    });
    // not due again before the interval, on either host
    expect(await b.counts.rollUp(now + PASS - 1)).toBeUndefined();
    now += PASS;
    const again = await a.counts.rollUp(now);
    expect(again?.changed).toBe(0);
    expect(await counts(a, ['x', 'y', 'z'])).toEqual({
      x: [3, 0, T0],
      y: [0, 4, T0],
      z: [0, 0, T0],
    });
  });

  test('events leave the count when they turn 30 days old; items pushed later start from the log', async () => {
    const { a, b } = inst;
    await a.content.applyWrites(DS, [{ id: 'old', url: 'http://img/old.png' }], 'post', T0);
    await a.events.append([
      event('old', T0 - WINDOW + 60_000),
      event('old', T0 - WINDOW - 1),
      event('old', T0 - 1000, 'purchase', 2),
      event('later', T0 - 1000),
      event('later', T0 - 2000),
    ]);
    now = T0 + 1000;
    expect(await a.counts.rollUp(now)).toBeDefined();
    expect((await counts(a, ['old'])).old).toEqual([1, 2, T0]);
    // the first click is 30 days old a minute after T0; the pass after that drops it
    now = T0 + 60_000 + PASS;
    expect(await b.counts.rollUp(now)).toBeDefined();
    expect((await counts(a, ['old'])).old).toEqual([0, 2, T0]);
    // an id first pushed after its events were rolled up starts from them
    await b.content.applyWrites(DS, [{ id: 'later', url: 'http://img/later.png' }], 'post', now);
    expect((await counts(a, ['later'])).later).toEqual([2, 0, now]);
  });

  test('items written again while counts are rolled up keep both the write and their counts', async () => {
    const { a, b } = inst;
    const ids = Array.from({ length: 40 }, (_, i) => `w${i}`);
    await a.content.applyWrites(
      DS,
      ids.map((id) => ({ id, url: `http://img/${id}.png`, metadata: { v: 0 } })),
      'post',
      T0,
    );
    await a.events.append(
      ids.flatMap((id, i) => Array.from({ length: i + 1 }, () => event(id, T0 - 1))),
    );
    now = T0 + 1000;
    // the writes race the pass: each item ends with v 1 and its counts
    await Promise.all([
      a.counts.rollUp(now),
      ...ids.map((id) => b.content.applyWrites(DS, [{ id, metadata: { v: 1 } }], 'put', now)),
    ]);
    // a pass that found an item mid-write leaves it to the next one (the events are still new)
    now += PASS;
    await b.counts.rollUp(now);
    const items = new Map(
      (await a.content.getItems(DS, ids, { latest: true })).map((i) => [i.id, i]),
    );
    expect(
      ids.map((id) => [id, items.get(id)?.metadata.v, items.get(id)?.counts?.popularity]),
    ).toEqual(ids.map((id, i) => [id, 1, i + 1]));
  });

  test('a pass of many items lets other work run meanwhile; a pass claimed over stops, and the next finishes', async () => {
    const { a, b } = inst;
    const ids = Array.from({ length: 400 }, (_, i) => `m${i}`);
    await a.content.applyWrites(
      DS,
      ids.map((id) => ({ id, url: `http://img/${id}.png` })),
      'post',
      T0,
    );
    await a.events.append(ids.map((id) => event(id, T0 - 1)));
    now = T0 + 1000;
    let turns = 0;
    let done = false;
    const spin = (): void => {
      turns++;
      if (!done) setImmediate(spin);
    };
    setImmediate(spin);
    const first = a.counts.rollUp(now).finally(() => (done = true));
    // another host's pass, due by its clock, claims while the first one is still at work: once
    // the first has claimed and counted something (its claim is a write, slower on Elasticsearch)
    const deadline = Date.now() + 10_000;
    while (!done && !Object.values(await counts(a, ids)).some((c) => c[0] === 1)) {
      if (Date.now() > deadline) throw new Error('the first pass never started counting');
      await new Promise((r) => setImmediate(r));
    }
    const second = await b.counts.rollUp(now + PASS);
    expect(second).toBeDefined();
    expect(await first).toBeDefined();
    expect(turns).toBeGreaterThan(4);
    expect(Object.values(await counts(a, ids)).map((c) => c[0])).toEqual(ids.map(() => 1));
    // the watermark moved past every event: the next pass recounts nothing
    expect(await a.counts.rollUp(now + 2 * PASS)).toEqual({ recomputed: 0, changed: 0 });
  });

  if (installations[0]![0] === 'Elasticsearch')
    test('an item written before the counts existed gets its zeros from a pass', async () => {
      const { a } = inst;
      const { client, indices } = inst.es!;
      await a.content.applyWrites(DS, [{ id: 'legacy', url: 'http://img/l.png' }], 'post', T0);
      const index = indices.items(DS);
      const doc = (await client.get<Record<string, any>>({ index, id: 'legacy' }))._source!;
      delete doc.counts;
      doc.attrs = (doc.attrs as Array<{ f: string }>).filter(
        (x) => x.f !== 'service_popularity' && x.f !== 'service_purchases',
      );
      await client.index({ index, id: 'legacy', document: doc, refresh: true });
      now = T0 + 1000;
      await a.counts.rollUp(now);
      await client.indices.refresh({ index });
      const after = (await client.get<Record<string, any>>({ index, id: 'legacy' }))._source!;
      expect(
        (after.attrs as Array<{ f: string; n?: number }>)
          .filter((x) => x.f.startsWith('service_'))
          .map((x) => [x.f, x.n]),
      ).toEqual([
        ['service_popularity', 0],
        ['service_purchases', 0],
      ]);
    });
});
