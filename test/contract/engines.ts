/**
 * The shared-state adapters of each engine, for the contract suites: `host()` opens them as
 * another process would (its own SQLite connection to the same file, or its own Elasticsearch
 * client on the same indices), so a case can play two hosts against one installation. They are
 * built as the composition root builds them (embeddedPorts, esPorts), outage policy included.
 */
import { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { Dataset } from '../../src/domain/dataset';
import type { AccountStore } from '../../src/ports/account-store';
import type { EventLog } from '../../src/ports/event-log';
import type { KeyStore } from '../../src/ports/key-store';
import type { UsageLedger } from '../../src/ports/usage-ledger';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';

export interface Host {
  accounts: AccountStore;
  ledger: UsageLedger;
  events: EventLog;
  keys: KeyStore;
  /** The Elasticsearch host's own client and index names, for a case that breaks an index. */
  es?: { client: Client; indices: EsIndices };
}

export interface Installation {
  host(): Promise<Host>;
  close(): Promise<void>;
}

/** The embedded engine: each host its own SQLite connection to one file. */
const embeddedInstallation = (): Installation => {
  const dir = tempDir('vss-contract-');
  const dbs: Db[] = [];
  return {
    async host() {
      const db = openDb(path.join(dir, 'store.db'));
      dbs.push(db);
      const { accounts, ledger, events, keys } = embeddedPorts(db, dir);
      return { accounts, ledger, events, keys };
    },
    async close() {
      dbs.forEach((db) => db.close());
    },
  };
};

/** Elasticsearch: each host its own client on one set of indices. */
export const esInstallation = (): Installation => {
  const prefix = `k${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
  const clients: Client[] = [];
  return {
    async host() {
      const client = esClient(ES_URL);
      clients.push(client);
      const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      await indices.ensureShared();
      // no case here writes an item, so the vector size is any
      const { accounts, ledger, events, keys } = esPorts(indices, { vectorDims: 8 });
      return { accounts, ledger, events, keys, es: { client, indices } };
    },
    async close() {
      await clients[0]?.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
      await Promise.all(clients.map((c) => c.close()));
    },
  };
};

export const ENGINES: Array<[string, () => Installation]> = tierOf({
  local: ['embedded (SQLite)', embeddedInstallation],
  services: ['Elasticsearch', esInstallation],
});

/** A dataset record of organisation `org`, as the account stores keep it. */
export const datasetRecord = (id: string, name: string, org = 'acme'): Dataset => ({
  id,
  org,
  name,
  settings: { fields: {}, version: 1 },
  createdAt: '2026-01-01T00:00:00.000Z',
  browseRotation: 0,
  embedder: { id: 'emb-a', dimensions: 8 },
});

/**
 * Two hosts of a fresh installation for each case of a `describe.each(ENGINES)` block; read
 * `a` and `b` inside the cases.
 */
export function twoHosts(open: () => Installation): { a: Host; b: Host; inst: Installation } {
  const hosts = {} as { a: Host; b: Host; inst: Installation };
  beforeEach(async () => {
    hosts.inst = open();
    hosts.a = await hosts.inst.host();
    hosts.b = await hosts.inst.host();
  });
  afterEach(() => hosts.inst.close());
  return hosts;
}
