/**
 * The webhook registry (WebhookStore, contract §17) on every engine, built as the composition
 * root builds it (embeddedPorts, esPorts). Two hosts share one installation: on the embedded
 * engine two SQLite connections to one file, on Elasticsearch two clients on one set of indices.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { Webhook } from '../../src/domain/webhook';
import type { WebhookStore } from '../../src/ports/webhook-store';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T = Date.UTC(2026, 5, 10, 12, 0);

interface Rig {
  a: WebhookStore;
  /** Another host of the same installation. */
  b: WebhookStore;
  close(): Promise<void>;
}

const rigs = tierOf<() => Promise<Rig>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-webhooks-');
      const dbs: Db[] = [openDb(path.join(dir, 'store.db')), openDb(path.join(dir, 'store.db'))];
      return {
        a: embeddedPorts(dbs[0]!, dir).webhooks,
        b: embeddedPorts(dbs[1]!, dir).webhooks,
        close: async () => dbs.forEach((db) => db.close()),
      };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `w${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients: Client[] = [esClient(ES_URL), esClient(ES_URL)];
      const [ia, ib] = clients.map((c) => new EsIndices(c, prefix, { shards: 1, replicas: 0 }));
      await ia!.ensureShared();
      return {
        a: esPorts(ia!, { vectorDims: 8 }).webhooks,
        b: esPorts(ib!, { vectorDims: 8 }).webhooks,
        async close() {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

let n = 0;
const hook = (org: string, over: Partial<Webhook> = {}): Webhook => ({
  id: `wh_${String(++n).padStart(20, '0')}`,
  org,
  url: 'https://receiver.example/hooks',
  events: ['items.processed', 'dataset.published'],
  state: 'active',
  salt: `salt-${n}`,
  createdAt: T + n,
  ...over,
});

describe.each(rigs)('WebhookStore on %s', (_name, open) => {
  let rig: Rig;
  beforeEach(async () => {
    rig = await open();
  });
  afterEach(() => rig.close());

  test('create, list oldest first, get, delete; another host sees each at once', async () => {
    const w1 = hook('acme', { datasetIds: ['ds1', 'ds2'] });
    const w2 = hook('acme', { events: ['usage.threshold'] });
    const other = hook('globex');
    expect(await rig.a.create(w2, 20)).toBe(true);
    expect(await rig.b.create(w1, 20)).toBe(true);
    expect(await rig.a.create(other, 20)).toBe(true);
    expect(await rig.b.list('acme')).toEqual([w1, w2]);
    expect(await rig.a.list('globex')).toEqual([other]);
    expect(await rig.a.list('nobody')).toEqual([]);
    expect(await rig.b.get('acme', w1.id)).toEqual(w1);
    // another organisation's webhook is not there for it
    expect(await rig.b.get('globex', w1.id)).toBeUndefined();
    expect(await rig.a.delete('globex', w1.id)).toBe(false);
    expect(await rig.a.delete('acme', w1.id)).toBe(true);
    expect(await rig.b.delete('acme', w1.id)).toBe(false);
    expect(await rig.b.get('acme', w1.id)).toBeUndefined();
    expect(await rig.b.list('acme')).toEqual([w2]);
  });

  test('a webhook id is created once', async () => {
    const w = hook('acme');
    expect(await rig.a.create(w, 20)).toBe(true);
    expect(await rig.b.create({ ...w, url: 'https://elsewhere.example/' }, 20)).toBe(false);
    expect(await rig.a.list('acme')).toEqual([w]);
  });

  test('setState disables with a reason and re-activates; a deleted webhook stays deleted', async () => {
    const w = hook('acme');
    const kept = hook('acme');
    await rig.a.create(w, 20);
    await rig.a.create(kept, 20);
    await rig.b.setState(w.id, 'disabled', 'gone');
    expect(await rig.a.get('acme', w.id)).toEqual({
      ...w,
      state: 'disabled',
      disabledReason: 'gone',
    });
    await rig.b.setState(w.id, 'disabled', 'retries_exhausted');
    expect((await rig.a.get('acme', w.id))?.disabledReason).toBe('retries_exhausted');
    await rig.a.setState(w.id, 'active');
    expect(await rig.b.get('acme', w.id)).toEqual(w);
    await rig.a.delete('acme', w.id);
    await rig.b.setState(w.id, 'disabled', 'gone');
    await rig.b.setState('wh_unknown', 'disabled', 'gone');
    expect(await rig.a.list('acme')).toEqual([kept]);
    expect(await rig.a.all()).toEqual([kept]);
  });

  test('all lists every webhook of every organisation, in any state', async () => {
    const ws = [hook('acme'), hook('globex'), hook('acme'), hook('initech')];
    for (const w of ws) expect(await rig.a.create(w, 20)).toBe(true);
    await rig.a.setState(ws[1]!.id, 'disabled', 'retries_exhausted');
    const all = await rig.b.all();
    expect(all.map((w) => w.id).sort()).toEqual(ws.map((w) => w.id).sort());
    expect(all.find((w) => w.id === ws[1]!.id)).toEqual({
      ...ws[1],
      state: 'disabled',
      disabledReason: 'retries_exhausted',
    });
  });

  test('of 25 concurrent creates on two hosts exactly maxPerOrg succeed', async () => {
    const max = 7;
    const ws = Array.from({ length: 25 }, () => hook('acme'));
    const rs = await Promise.all(ws.map((w, i) => (i % 2 ? rig.a : rig.b).create(w, max)));
    expect(rs.filter(Boolean)).toHaveLength(max);
    const created = ws.filter((_, i) => rs[i]);
    expect((await rig.a.list('acme')).map((w) => w.id).sort()).toEqual(
      created.map((w) => w.id).sort(),
    );
    // another organisation has its own places; a deleted webhook frees one
    expect(await rig.b.create(hook('globex'), max)).toBe(true);
    expect(await rig.b.create(hook('acme'), max)).toBe(false);
    await rig.a.delete('acme', created[0]!.id);
    expect(await rig.b.create(hook('acme'), max)).toBe(true);
    expect(await rig.a.create(hook('acme'), max)).toBe(false);
  });
});
