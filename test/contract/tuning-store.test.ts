/**
 * Tuned similarity's stored projections and fitting lease (TuningStore, contract §20) on every
 * engine, built as the composition root builds it. Two hosts share one installation: two SQLite
 * connections to one file, or two Elasticsearch clients on one set of indices.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { TuningStore } from '../../src/ports/tuning-store';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';

interface Rig {
  a: TuningStore;
  b: TuningStore;
  close(): Promise<void>;
}

const rigs = tierOf<() => Promise<Rig>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-tuning-');
      const dbs: Db[] = [];
      const open = () => {
        const db = openDb(path.join(dir, 'store.db'));
        dbs.push(db);
        return embeddedPorts(db, dir).tuning;
      };
      return { a: open(), b: open(), close: async () => dbs.forEach((db) => db.close()) };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients: Client[] = [];
      const open = () => {
        const client = esClient(ES_URL);
        clients.push(client);
        return new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      };
      const [ia, ib] = [open(), open()];
      await ia.ensureShared();
      return {
        a: esPorts(ia, { vectorDims: 8 }).tuning,
        b: esPorts(ib, { vectorDims: 8 }).tuning,
        async close() {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

const bytes = (n: number) => Uint8Array.from({ length: 40 }, (_, i) => (i * 7 + n) % 256);

describe.each(rigs)('TuningStore on %s', (_name, make) => {
  let rig: Rig;
  beforeEach(async () => {
    rig = await make();
  });
  afterEach(async () => rig.close());

  test('a projection is read back bit for bit by another host, per dataset, never replaced', async () => {
    const { a, b } = rig;
    await a.putModel('ds1', 'm1', bytes(1));
    expect(await b.getModel('ds1', 'm1')).toEqual(bytes(1));
    expect(await b.getModel('ds2', 'm1')).toBeUndefined();
    expect(await b.getModel('ds1', 'nope')).toBeUndefined();
    await expect(b.putModel('ds1', 'm1', bytes(2))).rejects.toThrow();
    expect(await a.getModel('ds1', 'm1')).toEqual(bytes(1));
  });

  test('pruning keeps what is named, of that dataset only, even one written a moment ago', async () => {
    const { a, b } = rig;
    await a.putModel('ds1', 'm1', bytes(1));
    await a.putModel('ds1', 'm2', bytes(2));
    await a.putModel('ds2', 'm3', bytes(3));
    await b.pruneModels('ds1', ['m2']);
    expect(await a.getModel('ds1', 'm1')).toBeUndefined();
    expect(await a.getModel('ds1', 'm2')).toEqual(bytes(2));
    await a.putModel('ds1', 'm4', bytes(4));
    await b.pruneModels('ds1', []);
    expect(await a.getModel('ds1', 'm2')).toBeUndefined();
    expect(await a.getModel('ds1', 'm4')).toBeUndefined();
    expect(await a.getModel('ds2', 'm3')).toEqual(bytes(3));
    await b.pruneModels('never-fitted', []);
  });

  test('one host holds the fitting lease until it lapses', async () => {
    const { a, b } = rig;
    expect(await a.claim('A', 1000, 2000)).toBe(true);
    expect(await b.claim('B', 1500, 2500)).toBe(false);
    expect(await a.claim('A', 1500, 3000)).toBe(true);
    expect(await b.claim('B', 3001, 4000)).toBe(true);
    expect(await a.claim('A', 3500, 4500)).toBe(false);
  });
});
