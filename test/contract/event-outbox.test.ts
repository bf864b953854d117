/**
 * The webhook outbox (EventOutbox, contract §17) on every engine, built as the composition root
 * builds it (embeddedPorts, esPorts). Two hosts share one installation: on the embedded engine
 * two SQLite connections to one file (as the api and worker processes), on Elasticsearch two
 * clients on one set of indices. Time is passed in, never slept through.
 */
import type { Client } from '@elastic/elasticsearch';
import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { Delivery, DeliverySettlement, ItemFact } from '../../src/domain/webhook';
import type { EventOutbox } from '../../src/ports/event-outbox';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const T = Date.UTC(2026, 5, 10, 12, 0);

interface Rig {
  a: EventOutbox;
  /** Another host of the same installation. */
  b: EventOutbox;
  /** The outbox as a process started afresh finds it (every earlier handle closed). */
  reopen(): Promise<EventOutbox>;
  close(): Promise<void>;
}

const rigs = tierOf<() => Promise<Rig>>({
  local: [
    'embedded',
    async () => {
      const dir = tempDir('vss-outbox-');
      const dbs: Db[] = [];
      const open = () => {
        const db = openDb(path.join(dir, 'store.db'));
        dbs.push(db);
        return embeddedPorts(db, dir).outbox;
      };
      const closeAll = () => dbs.filter((db) => db.open).forEach((db) => db.close());
      return {
        a: open(),
        b: open(),
        async reopen() {
          closeAll();
          return open();
        },
        close: async () => closeAll(),
      };
    },
  ],
  services: [
    'Elasticsearch',
    async () => {
      const prefix = `o${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const clients: Client[] = [];
      const open = () => {
        const client = esClient(ES_URL);
        clients.push(client);
        return new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      };
      const [ia, ib] = [open(), open()];
      await ia.ensureShared();
      return {
        a: esPorts(ia, { vectorDims: 8 }).outbox,
        b: esPorts(ib, { vectorDims: 8 }).outbox,
        async reopen() {
          return esPorts(open(), { vectorDims: 8 }).outbox;
        },
        async close() {
          await clients[0]!.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await Promise.all(clients.map((c) => c.close()));
        },
      };
    },
  ],
});

const fact = (id: string, at: number, over: Partial<ItemFact> = {}): ItemFact => ({
  id,
  org: 'acme',
  datasetId: 'ds1',
  kind: 'processed',
  itemId: `item-${id}`,
  at,
  ...over,
});

const delivery = (id: string, webhookId: string, over: Partial<Delivery> = {}): Delivery => ({
  id,
  webhookId,
  org: 'acme',
  type: 'items.processed',
  body: `{"id":"${id}"}`,
  state: 'pending',
  attempts: 0,
  lastStatus: null,
  nextAttemptAt: T,
  createdAt: T,
  ...over,
});

const ids = (ds: Array<{ id: string }>) => ds.map((d) => d.id);
/** A fact as read, without the outbox's own reference. */
const plain = ({ ref: _, ...f }: ItemFact): ItemFact => f;

describe.each(rigs)('EventOutbox on %s', (_name, open) => {
  let rig: Rig;
  beforeEach(async () => {
    rig = await open();
  });
  afterEach(() => rig.close());

  test('recordFacts keeps a fact as first written, and survives a reopen', async () => {
    await rig.a.recordFacts([fact('f1', T + 2), fact('f2', T + 1)]);
    await rig.b.recordFacts([fact('f1', T + 9, { itemId: 'other' }), fact('f3', T + 3)]);
    // concurrent calls (one group commit on Elasticsearch) each resolve once written
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => rig.a.recordFacts([fact(`g${i}`, T + 100 + i)])),
    );
    await rig.a.recordFacts([]);
    const fresh = await rig.reopen();
    const facts = await fresh.unbatchedFacts(100);
    // f1 written again in another write may come again (the batcher tells it once): as written
    // first, it comes first
    expect([...new Set(ids(facts))]).toEqual([
      'f2',
      'f1',
      'f3',
      ...Array.from({ length: 20 }, (_, i) => `g${i}`),
    ]);
    expect(plain(facts[1]!)).toEqual(fact('f1', T + 2));
    expect(ids(await fresh.unbatchedFacts(2))).toEqual(['f2', 'f1']);
  });

  test('a failed fact keeps its error', async () => {
    const failed = fact('x', T, { kind: 'failed', error: { code: 'not_found', message: '404' } });
    await rig.a.recordFacts([failed]);
    expect((await rig.b.unbatchedFacts(10)).map(plain)).toEqual([failed]);
  });

  test('the batcher lease: one of two claimers, renewed by its holder, taken once lapsed', async () => {
    const both = await Promise.all([
      rig.a.claimBatcher('A', T, T + 10_000),
      rig.b.claimBatcher('B', T, T + 10_000),
    ]);
    expect(both.filter(Boolean)).toHaveLength(1);
    const [holder, other] = both[0] ? (['A', 'B'] as const) : (['B', 'A'] as const);
    const of = (o: string) => (o === 'A' ? rig.a : rig.b);
    expect(await of(other).claimBatcher(other, T + 5_000, T + 15_000)).toBe(false);
    // the holder renews before its lease ends
    expect(await of(holder).claimBatcher(holder, T + 5_000, T + 15_000)).toBe(true);
    expect(await of(other).claimBatcher(other, T + 12_000, T + 22_000)).toBe(false);
    // lapsed: the other takes it over, and the old holder no longer has it
    expect(await of(other).claimBatcher(other, T + 15_000, T + 25_000)).toBe(true);
    expect(await of(holder).claimBatcher(holder, T + 15_001, T + 25_001)).toBe(false);
  });

  test('enqueue made twice creates each delivery once and removes its facts', async () => {
    // written together: a batch of two of them leaves the third
    await rig.a.recordFacts([fact('f1', T), fact('f2', T + 1), fact('f3', T + 2)]);
    const read = await rig.a.unbatchedFacts(10);
    const done = read.filter((f) => f.id !== 'f3');
    const batch = [delivery('msg_1', 'wh_a'), delivery('msg_2', 'wh_b')];
    await rig.a.enqueue(batch, done);
    // a holder that died before forgetting the facts: the same batch again, from another host
    const again = batch.map((d) => ({ ...d, body: '{"again":true}' }));
    await Promise.all([rig.b.enqueue(again, done), rig.a.enqueue(again, done)]);
    expect(await rig.a.list('wh_a', 10)).toEqual([batch[0]]);
    expect(await rig.b.list('wh_b', 10)).toEqual([batch[1]]);
    const left = await rig.b.unbatchedFacts(10);
    expect(left.map(plain)).toEqual([fact('f3', T + 2)]);
    expect((await rig.b.depth(T)).unbatched).toBe(1);
    await rig.a.enqueue([], left);
    expect(await rig.a.unbatchedFacts(10)).toEqual([]);
  });

  test('facts written apart and batched together are all forgotten', async () => {
    await Promise.all([
      rig.a.recordFacts([fact('f1', T)]),
      rig.b.recordFacts([fact('f2', T + 1), fact('f3', T + 2)]),
    ]);
    await rig.a.recordFacts([fact('f4', T + 3)]);
    const read = await rig.b.unbatchedFacts(10);
    expect(ids(read)).toEqual(['f1', 'f2', 'f3', 'f4']);
    await rig.b.enqueue([], read);
    expect(await rig.a.unbatchedFacts(10)).toEqual([]);
    expect((await rig.a.depth(T)).unbatched).toBe(0);
  });

  test('of many concurrent claims one wins; after the claim lapses another wins', async () => {
    await rig.a.enqueue([delivery('msg_c', 'wh_a')], []);
    const claims = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? rig.a : rig.b).claim('msg_c', `w${i}`, T, T + 30_000),
      ),
    );
    const won = claims.flatMap((c, i) => (c ? [i] : []));
    expect(won).toHaveLength(1);
    expect(claims[won[0]!]).toEqual(delivery('msg_c', 'wh_a'));
    const first = `w${won[0]}`;
    // still held: nobody else, not even at its last millisecond
    expect(await rig.a.claim('msg_c', 'late', T + 29_999, T + 60_000)).toBeUndefined();
    expect(await rig.a.due(T + 29_999, 10, ['wh_a'])).toEqual([]);
    expect(ids(await rig.a.due(T + 30_000, 10, ['wh_a']))).toEqual(['msg_c']);
    expect(await rig.b.claim('msg_c', 'second', T + 30_000, T + 60_000)).toBeDefined();
    // the first owner lost it: its outcome is not written
    const outcome: DeliverySettlement = {
      state: 'delivered',
      attempts: 2,
      lastStatus: 200,
      nextAttemptAt: null,
    };
    expect(await rig.a.settle('msg_c', first, outcome)).toBe(false);
    expect(await rig.a.settle('msg_c', 'second', outcome)).toBe(true);
    expect(await rig.b.list('wh_a', 1)).toEqual([
      delivery('msg_c', 'wh_a', {
        state: 'delivered',
        attempts: 2,
        lastStatus: 200,
        nextAttemptAt: null,
      }),
    ]);
    // settled: neither due nor claimable
    expect(await rig.a.claim('msg_c', 'third', T + 90_000, T + 99_000)).toBeUndefined();
    expect(await rig.a.due(T + 90_000, 10, ['wh_a'])).toEqual([]);
  });

  test('settle writes a failed attempt, frees the claim and schedules the next', async () => {
    await rig.a.enqueue([delivery('msg_s', 'wh_a')], []);
    expect(await rig.a.claim('msg_s', 'w', T, T + 30_000)).toBeDefined();
    const next = {
      state: 'pending' as const,
      attempts: 1,
      lastStatus: 500,
      lastError: 'http_500',
      nextAttemptAt: T + 5_000,
    };
    expect(await rig.a.settle('msg_s', 'w', next)).toBe(true);
    // settled once: the claim is freed, so the same owner cannot settle again
    expect(await rig.a.settle('msg_s', 'w', next)).toBe(false);
    expect(await rig.b.due(T + 4_999, 10, ['wh_a'])).toEqual([]);
    const [d] = await rig.b.due(T + 5_000, 10, ['wh_a']);
    expect(d).toEqual(delivery('msg_s', 'wh_a', next));
    expect(await rig.b.claim('msg_s', 'w2', T + 5_000, T + 35_000)).toEqual(d);
  });

  test('due skips claimed, future, settled and other webhooks’ deliveries, not manual ones', async () => {
    await rig.a.enqueue(
      [
        delivery('msg_due2', 'wh_a', { nextAttemptAt: T - 5, createdAt: T - 100 }),
        delivery('msg_due1', 'wh_a', { nextAttemptAt: T - 10, createdAt: T - 50 }),
        delivery('msg_future', 'wh_a', { nextAttemptAt: T + 1 }),
        delivery('msg_claimed', 'wh_a', { nextAttemptAt: T - 20 }),
        delivery('msg_other', 'wh_b', { nextAttemptAt: T - 30 }),
        delivery('msg_manual', 'wh_b', { nextAttemptAt: T - 1, manual: true, attempts: 8 }),
        delivery('msg_done', 'wh_a', { state: 'delivered', nextAttemptAt: null }),
        delivery('msg_failed', 'wh_a', { state: 'failed', nextAttemptAt: T - 40 }),
      ],
      [],
    );
    expect(await rig.a.claim('msg_claimed', 'w', T - 20, T + 60_000)).toBeDefined();
    // another host sees what the first just wrote
    expect(ids(await rig.b.due(T, 10, ['wh_a']))).toEqual(['msg_due1', 'msg_due2', 'msg_manual']);
    expect(ids(await rig.b.due(T, 2, ['wh_a']))).toEqual(['msg_due1', 'msg_due2']);
    expect(ids(await rig.b.due(T, 10, []))).toEqual(['msg_manual']);
    expect(ids(await rig.b.due(T, 10, ['wh_a', 'wh_b']))).toEqual([
      'msg_other',
      'msg_due1',
      'msg_due2',
      'msg_manual',
    ]);
    expect(ids(await rig.a.due(T + 1, 10, ['wh_a']))).toEqual([
      'msg_due1',
      'msg_due2',
      'msg_manual',
      'msg_future',
    ]);
  });

  test('list is newest first, capped, one webhook only, and sees a write just made', async () => {
    const made = Array.from({ length: 7 }, (_, i) =>
      delivery(`msg_${i}`, 'wh_l', { createdAt: T + i * 1_000 }),
    );
    await rig.a.enqueue([...made, delivery('msg_x', 'wh_m')], []);
    expect(ids(await rig.b.list('wh_l', 3))).toEqual(['msg_6', 'msg_5', 'msg_4']);
    expect(ids(await rig.b.list('wh_l', 100))).toEqual(ids([...made].reverse()));
    expect(await rig.b.list('wh_none', 10)).toEqual([]);
    await rig.a.enqueue([delivery('msg_7', 'wh_l', { createdAt: T + 7_000 })], []);
    expect(ids(await rig.b.list('wh_l', 1))).toEqual(['msg_7']);
  });

  test('retry: pending becomes due now; delivered or failed gets one manual attempt', async () => {
    await rig.a.enqueue(
      [
        delivery('msg_p', 'wh_a', { nextAttemptAt: T + 3_600_000, attempts: 3, createdAt: T }),
        delivery('msg_d', 'wh_a', {
          state: 'delivered',
          attempts: 2,
          lastStatus: 200,
          nextAttemptAt: null,
          createdAt: T + 1,
        }),
        delivery('msg_f', 'wh_a', {
          state: 'failed',
          attempts: 8,
          lastStatus: 500,
          lastError: 'http_500',
          nextAttemptAt: null,
          createdAt: T + 2,
        }),
      ],
      [],
    );
    const now = T + 10_000;
    expect(await rig.b.retry('wh_other', 'msg_p', now)).toBe(false);
    expect(await rig.b.retry('wh_a', 'msg_none', now)).toBe(false);
    for (const id of ['msg_p', 'msg_d', 'msg_f'])
      expect(await rig.b.retry('wh_a', id, now)).toBe(true);
    const listed = await rig.a.list('wh_a', 10);
    expect(listed).toEqual([
      delivery('msg_f', 'wh_a', {
        attempts: 8,
        lastStatus: 500,
        lastError: 'http_500',
        nextAttemptAt: now,
        manual: true,
        createdAt: T + 2,
      }),
      delivery('msg_d', 'wh_a', {
        attempts: 2,
        lastStatus: 200,
        nextAttemptAt: now,
        manual: true,
        createdAt: T + 1,
      }),
      delivery('msg_p', 'wh_a', { attempts: 3, nextAttemptAt: now, createdAt: T }),
    ]);
    // the manual ones are due even when their webhook is not active
    expect(ids(await rig.a.due(now, 10, []))).toEqual(['msg_d', 'msg_f']);
    expect(ids(await rig.a.due(now, 10, ['wh_a']))).toEqual(['msg_p', 'msg_d', 'msg_f']);
  });

  test('prune keeps pending deliveries and the newest `keep`; forget drops all', async () => {
    const states = ['pending', 'delivered', 'failed', 'delivered', 'pending', 'delivered'] as const;
    await rig.a.enqueue(
      [
        ...states.map((state, i) =>
          delivery(`msg_${i}`, 'wh_p', {
            state,
            createdAt: T + i,
            nextAttemptAt: state === 'pending' ? T : null,
          }),
        ),
        delivery('msg_q', 'wh_q', { state: 'delivered', createdAt: T - 1 }),
      ],
      [],
    );
    await rig.b.prune('wh_p', 3);
    expect(ids(await rig.a.list('wh_p', 10))).toEqual(['msg_5', 'msg_4', 'msg_3', 'msg_0']);
    await rig.b.prune('wh_p', 10);
    expect(ids(await rig.a.list('wh_p', 10))).toHaveLength(4);
    await rig.b.prune('wh_p', 0);
    expect(ids(await rig.a.list('wh_p', 10))).toEqual(['msg_4', 'msg_0']);
    expect(ids(await rig.a.list('wh_q', 10))).toEqual(['msg_q']);
    await rig.b.forget('wh_p');
    expect(await rig.a.list('wh_p', 10)).toEqual([]);
    expect(await rig.a.due(T, 10, ['wh_p'])).toEqual([]);
    expect(ids(await rig.a.list('wh_q', 10))).toEqual(['msg_q']);
  });

  test('mark is create-only: of concurrent callers exactly one creates a key', async () => {
    const key = 'usage:acme:credits:202606:10:80';
    expect(await rig.a.hasMark(key)).toBe(false);
    const rs = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? rig.a : rig.b).mark(key, T + i)),
    );
    expect(rs.filter(Boolean)).toHaveLength(1);
    expect(await rig.a.mark(key, T + 100)).toBe(false);
    // a realtime read: the other host sees it at once
    expect(await rig.b.hasMark(key)).toBe(true);
    expect(await rig.b.hasMark(`${key}0`)).toBe(false);
    expect(await rig.a.mark(`${key}0`, T)).toBe(true);
    // a key longer than Elasticsearch names a document by
    const long = `usage:${'o'.repeat(1_000)}`;
    expect(await rig.a.mark(long, T)).toBe(true);
    expect(await rig.b.mark(long, T)).toBe(false);
    expect(await rig.a.hasMark(long)).toBe(true);
    expect(await rig.a.hasMark(`${long}y`)).toBe(false);
    expect(await rig.b.mark(`${long}x`, T)).toBe(true);
  });

  test('setSeenStatus is a compare-and-set on the epoch', async () => {
    expect(await rig.a.seenStatus('ds1')).toBeUndefined();
    expect(await rig.a.setSeenStatus('ds1', { status: 'pending', epoch: 0 }, 0)).toBe(false);
    expect(await rig.a.setSeenStatus('ds1', { status: 'pending', epoch: 0 })).toBe(true);
    // none stored is no longer true
    expect(await rig.b.setSeenStatus('ds1', { status: 'published', epoch: 0 })).toBe(false);
    expect(await rig.b.seenStatus('ds1')).toEqual({ status: 'pending', epoch: 0 });
    const racers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? rig.a : rig.b).setSeenStatus(
          'ds1',
          { status: i % 3 ? 'published' : 'pending', epoch: 1 },
          0,
        ),
      ),
    );
    expect(racers.filter(Boolean)).toHaveLength(1);
    const w = racers.indexOf(true);
    expect(await rig.a.seenStatus('ds1')).toEqual({
      status: w % 3 ? 'published' : 'pending',
      epoch: 1,
    });
    expect(await rig.a.setSeenStatus('ds1', { status: 'pending', epoch: 2 }, 0)).toBe(false);
    expect(await rig.a.setSeenStatus('ds1', { status: 'pending', epoch: 2 }, 1)).toBe(true);
    expect(await rig.b.seenStatus('ds2')).toBeUndefined();
  });

  test('depth counts unbatched facts, due and scheduled deliveries, and the oldest', async () => {
    expect(await rig.a.depth(T)).toEqual({ unbatched: 0, due: 0, scheduled: 0 });
    await rig.a.recordFacts([fact('f1', T - 5), fact('f2', T - 3)]);
    await rig.a.enqueue(
      [
        delivery('msg_1', 'wh_a', { nextAttemptAt: T - 10 }),
        delivery('msg_2', 'wh_b', { nextAttemptAt: T }),
        delivery('msg_3', 'wh_a', { nextAttemptAt: T + 100 }),
        delivery('msg_4', 'wh_a', { state: 'delivered', nextAttemptAt: null }),
      ],
      [],
    );
    expect(await rig.b.depth(T)).toEqual({ unbatched: 2, due: 2, scheduled: 1, oldestAt: T - 10 });
    await rig.b.enqueue([], await rig.b.unbatchedFacts(10));
    expect(await rig.a.depth(T + 100)).toEqual({
      unbatched: 0,
      due: 3,
      scheduled: 0,
      oldestAt: T - 10,
    });
  });
});

// An installation upgraded with facts left by a release that wrote one fact per document.
const onServices = process.env.TEST_SEARCH_BACKEND === 'elasticsearch';
(onServices ? describe : describe.skip)('EventOutbox on Elasticsearch, upgraded', () => {
  test('facts stored one per document are read, counted and forgotten with the new ones', async () => {
    const prefix = `u${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
    const client = esClient(ES_URL);
    try {
      const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      await indices.ensureShared();
      const index = indices.shared('webhook_facts');
      await client.create({
        index,
        id: 'old1',
        document: {
          org: 'acme',
          dataset_id: 'ds1',
          kind: 'processed',
          item_id: 'item-old1',
          at: T,
        },
      });
      const outbox = esPorts(indices, { vectorDims: 8 }).outbox;
      await outbox.recordFacts([fact('f1', T + 1)]);
      const read = await outbox.unbatchedFacts(10);
      expect(read.map(plain)).toEqual([fact('old1', T), fact('f1', T + 1)]);
      expect((await outbox.depth(T)).unbatched).toBe(2);
      await outbox.enqueue([], read);
      expect(await outbox.unbatchedFacts(10)).toEqual([]);
    } finally {
      await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
      await client.close();
    }
  });
});
