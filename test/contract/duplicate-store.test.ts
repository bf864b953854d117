/**
 * The near-duplicate report's state (DuplicateStore, contract §18) on every engine, built as the
 * composition root builds it. Two hosts share one installation: two SQLite connections to one
 * file, or two Elasticsearch clients on one set of indices.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { DuplicateStore, NeighbourEntry } from '../../src/ports/duplicate-store';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T = Date.UTC(2026, 10, 27, 9, 0);

interface Rig {
  a: DuplicateStore;
  b: DuplicateStore;
  close(): Promise<void>;
}

const rigs = tierOf<() => Promise<Rig>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-dups-');
      const dbs: Db[] = [];
      const open = () => {
        const db = openDb(path.join(dir, 'store.db'));
        dbs.push(db);
        return embeddedPorts(db, dir).duplicates;
      };
      return {
        a: open(),
        b: open(),
        close: async () => dbs.forEach((db) => db.close()),
      };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `d${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients: Client[] = [];
      const open = () => {
        const client = esClient(ES_URL);
        clients.push(client);
        return new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      };
      const [ia, ib] = [open(), open()];
      await ia.ensureShared();
      return {
        a: esPorts(ia, { vectorDims: 8 }).duplicates,
        b: esPorts(ib, { vectorDims: 8 }).duplicates,
        async close() {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

const entry = (id: string, at: number, ...near: Array<[string, number]>): NeighbourEntry => ({
  id,
  processedAt: at,
  neighbours: near.map(([n, distance]) => ({ id: n, distance, processedAt: at + 1 })),
});
const byId = (es: NeighbourEntry[]) => [...es].sort((x, y) => (x.id < y.id ? -1 : 1));

describe.each(rigs)('DuplicateStore on %s', (_name, make) => {
  let rig: Rig;
  beforeEach(async () => {
    rig = await make();
  });
  afterEach(async () => rig.close());

  test('entries are replaced per item, dropped without neighbours, per dataset', async () => {
    const { a, b } = rig;
    await a.putEntries('ds1', [
      entry('i1', 1, ['i2', 0.05], ['i3', 0.1]),
      entry('i2', 2, ['i1', 0.05]),
    ]);
    await a.putEntries('ds2', [entry('i1', 9, ['z', 0.01])]);
    expect(byId(await b.entries('ds1'))).toEqual([
      entry('i1', 1, ['i2', 0.05], ['i3', 0.1]),
      entry('i2', 2, ['i1', 0.05]),
    ]);
    // searched again: new neighbours replace the old; none removes the entry
    await b.putEntries('ds1', [entry('i1', 5, ['i4', 0.02]), entry('i2', 6)]);
    expect(await a.entries('ds1')).toEqual([entry('i1', 5, ['i4', 0.02])]);
    await a.forget('ds1', ['i1', 'never']);
    expect(await b.entries('ds1')).toEqual([]);
    expect(await b.entries('ds2')).toEqual([entry('i1', 9, ['z', 0.01])]);
  });

  test('dismissals are sets: any order or repetition is one record; clear keeps them', async () => {
    const { a, b } = rig;
    await a.dismiss('ds1', ['b', 'a']);
    await b.dismiss('ds1', ['a', 'b', 'a']);
    await a.dismiss('ds1', ['c', 'a', 'd']);
    await a.dismiss('ds2', ['a', 'b']);
    expect(await b.dismissals('ds1')).toEqual(
      expect.arrayContaining([
        ['a', 'b'],
        ['a', 'c', 'd'],
      ]),
    );
    expect(await b.dismissals('ds1')).toHaveLength(2);
    await a.putEntries('ds1', [entry('a', 1, ['b', 0.1])]);
    await a.setState('ds1', { watermark: T, computedAt: T + 5, embedder: 'e1' });
    await b.clear('ds1');
    expect(await a.entries('ds1')).toEqual([]);
    expect(await a.state('ds1')).toEqual({});
    expect(await a.dismissals('ds1')).toHaveLength(2);
    expect(await a.dismissals('ds2')).toEqual([['a', 'b']]);
  });

  test('a deleted dataset leaves nothing; another keeps its own', async () => {
    const { a, b } = rig;
    for (const ds of ['ds1', 'ds2']) {
      await a.putEntries(ds, [entry('i1', 1, ['i2', 0.1])]);
      await a.dismiss(ds, ['i1', 'i2']);
      await a.setState(ds, { watermark: T, computedAt: T, embedder: 'e1' });
    }
    await b.dropDataset('ds1');
    expect(await a.entries('ds1')).toEqual([]);
    expect(await a.dismissals('ds1')).toEqual([]);
    expect(await a.state('ds1')).toEqual({});
    expect(await a.entries('ds2')).toEqual([entry('i1', 1, ['i2', 0.1])]);
    expect(await a.dismissals('ds2')).toEqual([['i1', 'i2']]);
  });

  test('pass state per dataset, read by another host', async () => {
    const { a, b } = rig;
    expect(await b.state('ds1')).toEqual({});
    await a.setState('ds1', { watermark: T, computedAt: T + 5, embedder: 'e1' });
    expect(await b.state('ds1')).toEqual({ watermark: T, computedAt: T + 5, embedder: 'e1' });
    expect(await b.state('ds2')).toEqual({});
    // a pass cut short records how far it got; the next state replaces it whole
    const progress = { started: T + 10, after: 'item-0499', embedder: 'e2' };
    await a.setState('ds1', { watermark: T, progress });
    expect(await b.state('ds1')).toEqual({ watermark: T, progress });
    await a.setState('ds1', { watermark: T + 5, computedAt: T + 20, embedder: 'e2' });
    expect(await b.state('ds1')).toEqual({ watermark: T + 5, computedAt: T + 20, embedder: 'e2' });
    await a.setState('ds2', { progress });
    await b.clear('ds2');
    expect(await a.state('ds2')).toEqual({});
  });

  test('the pass lease: one holder, renewed by it, taken over once lapsed', async () => {
    const { a, b } = rig;
    expect(await a.claim('host-a', T, T + 60_000)).toBe(true);
    expect(await b.claim('host-b', T + 1, T + 60_001)).toBe(false);
    expect(await a.claim('host-a', T + 30_000, T + 90_000)).toBe(true);
    expect(await b.claim('host-b', T + 60_001, T + 120_000)).toBe(false);
    expect(await b.claim('host-b', T + 90_001, T + 150_000)).toBe(true);
    expect(await a.claim('host-a', T + 90_002, T + 150_000)).toBe(false);
  });
});
