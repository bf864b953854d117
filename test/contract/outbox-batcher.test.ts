/**
 * The batcher's judgement of dataset.published (contract §17) on every engine's outbox: announced
 * once when the items a webhook heard of published the dataset, however many of them were
 * still settling when the batcher first looked; silent for a dataset published before, also
 * when the engine's counts lag behind the facts (Elasticsearch's refresh). The counts are the
 * test's, so that a lag can be set; ItemReader's fresh counts are in content-store.test.ts.
 */
import path from 'node:path';
import pino from 'pino';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { DatasetCounts } from '../../src/domain/dataset';
import type { ItemFact, Webhook } from '../../src/domain/webhook';
import { OutboxBatcher } from '../../src/jobs/outbox-batcher';
import type { EventOutbox } from '../../src/ports/event-outbox';
import type { WebhookStore } from '../../src/ports/webhook-store';
import { WebhookDirectory } from '../../src/services/webhook-directory';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';

const outboxes = tierOf<() => Promise<{ outbox: EventOutbox; close(): Promise<void> }>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-batcher-');
      const db = openDb(path.join(dir, 'store.db'));
      return { outbox: embeddedPorts(db, dir).outbox, close: async () => void db.close() };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const client = esClient(ES_URL);
      const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      await indices.ensureShared();
      return {
        outbox: esPorts(indices, { vectorDims: 8 }).outbox,
        close: async () => {
          await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await client.close();
        },
      };
    },
  ],
});

const T0 = Date.UTC(2026, 10, 28, 12);
const HOOK: Webhook = {
  id: 'wh_aaaaaaaaaaaaaaaaaaaa',
  org: 'o',
  url: 'https://receiver.test/hook',
  events: ['items.processed', 'dataset.published'],
  state: 'active',
  salt: 's',
  createdAt: T0 - 60_000,
};

/** Counts as the engine shows them: `shown` at once, `all` once made fresh. */
const processed = (n: number): DatasetCounts => ({ items: n, processed: n, pending: 0, errors: 0 });

describe.each(outboxes)('OutboxBatcher on %s', (_name, make) => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => close?.());

  async function rig(all: number, shown = all) {
    const made = await make();
    close = made.close;
    const { outbox } = made;
    let now = T0;
    const batcher = new OutboxBatcher({
      outbox,
      directory: new WebhookDirectory(
        { all: async () => [HOOK] } as unknown as WebhookStore,
        () => now,
      ),
      dataset: async () => ({
        org: 'o',
        name: 'cat',
        counts: async (fresh) => processed(fresh ? all : shown),
      }),
      now: () => now,
      log: pino({ level: 'silent' }),
      owner: 'host-a',
      made: () => undefined,
    });
    /** `n` processed facts, the i-th at `at(i)`. */
    const facts = (from: number, n: number, at: (i: number) => number): ItemFact[] =>
      Array.from({ length: n }, (_, k) => ({
        id: `f${from + k}`,
        org: 'o',
        datasetId: 'ds',
        kind: 'processed',
        itemId: `i${from + k}`,
        at: at(k),
      }));
    const published = async () =>
      (await outbox.list(HOOK.id, 100)).filter((d) => d.type === 'dataset.published');
    return { outbox, batcher, facts, published, at: (t: number) => (now = t) };
  }

  test('a fast ingest: facts still settling at the first look count, and it is announced', async () => {
    // 450 processed since the webhook existed: 150 settled, 300 in the last second
    const r = await rig(450);
    await r.outbox.recordFacts([
      ...r.facts(0, 150, () => T0),
      ...r.facts(150, 300, (k) => T0 + 2000 + k),
    ]);
    r.at(T0 + 2500);
    expect(await r.batcher.pass()).toBe(true);
    const made = await r.published();
    expect(made).toHaveLength(1);
    expect(JSON.parse(made[0]!.body).data).toMatchObject({ dataset: 'cat' });
    // the settling facts wait for their own deliveries
    expect(await r.outbox.unbatchedFacts(1000)).toHaveLength(300);
    // once per publication
    r.at(T0 + 5000);
    await r.batcher.pass();
    expect(await r.published()).toHaveLength(1);
  });

  test('a dataset published before its webhook existed is not announced', async () => {
    // 600 processed, of which the webhook heard of 150
    const r = await rig(600);
    await r.outbox.recordFacts(r.facts(0, 150, () => T0));
    r.at(T0 + 2500);
    expect(await r.batcher.pass()).toBe(true);
    expect(await r.published()).toEqual([]);
    expect((await r.outbox.seenStatus('ds'))?.status).toBe('published');
  });

  test('published before its webhook, then a fast ingest the counts do not show yet: silent', async () => {
    // 200 processed before the webhook, 300 since, all still settling; the counts show 350 of
    // the 500 until they are made fresh
    const r = await rig(500, 350);
    await r.outbox.recordFacts([
      ...r.facts(0, 1, () => T0),
      ...r.facts(1, 299, (k) => T0 + 2000 + k),
    ]);
    r.at(T0 + 2500);
    expect(await r.batcher.pass()).toBe(true);
    expect(await r.published()).toEqual([]);
    expect((await r.outbox.seenStatus('ds'))?.status).toBe('published');
  });
});
