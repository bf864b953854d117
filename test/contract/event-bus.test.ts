/**
 * The progress-notice bus (EventBus, contract §17 subscriptions) on both adapters, two
 * instances standing for two processes of one installation: SQLite instances on one queue.db,
 * AMQP instances with their own connections to one broker and exchange.
 */
import amqp from 'amqplib';
import path from 'node:path';
import pino from 'pino';
import { SqliteEventBus } from '../../src/adapters/queue/in-process/sqlite-event-bus';
import { AmqpEventBus } from '../../src/adapters/queue/rabbitmq/amqp-event-bus';
import type { EventBus, ProgressNotice } from '../../src/ports/event-bus';
import { tempDir, waitFor } from '../helpers/app';
import { tierOf } from './tier';

const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const log = pino({ level: 'silent' });

interface Rig {
  buses: [EventBus, EventBus];
  /** Removes what the rig left on a shared service. */
  cleanup(): Promise<void>;
}

const rigs = tierOf<() => Rig>({
  local: [
    'SQLite',
    () => {
      const file = path.join(tempDir('vss-bus-'), 'queue.db');
      return {
        buses: [new SqliteEventBus(file, log), new SqliteEventBus(file, log)],
        cleanup: async () => undefined,
      };
    },
  ],
  services: [
    'RabbitMQ',
    () => {
      const prefix = `test.b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}.`;
      return {
        buses: [new AmqpEventBus(AMQP_URL, prefix, log), new AmqpEventBus(AMQP_URL, prefix, log)],
        // the exchange is durable: the broker would keep one per test run
        async cleanup() {
          const conn = await amqp.connect(AMQP_URL);
          try {
            await (await conn.createChannel()).deleteExchange(`${prefix}events`);
          } finally {
            await conn.close();
          }
        },
      };
    },
  ],
});

let seq = 0;
const notice = (itemIds: string[]): ProgressNotice => ({
  org: 'acme',
  datasetId: 'ds-1',
  type: 'items.processed',
  itemIds,
  at: Date.now() + seq++,
});

describe.each(rigs)('EventBus on %s', (_name, make) => {
  let a: EventBus;
  let b: EventBus;
  let rig: Rig;
  beforeEach(() => {
    rig = make();
    [a, b] = rig.buses;
  });
  afterEach(async () => {
    await Promise.all([a.close(), b.close()]);
    await rig.cleanup();
  });

  /** Publishes `n` from `from` until `seen` holds it: a consumer binds asynchronously. */
  const deliver = (from: EventBus, seen: ProgressNotice[], n: ProgressNotice) =>
    waitFor(`notice ${n.itemIds[0]}`, async () => {
      if (!seen.some((s) => s.itemIds[0] === n.itemIds[0])) await from.publish([n]);
      return seen.some((s) => s.itemIds[0] === n.itemIds[0]);
    });

  it('takes a publish with no subscriber anywhere', async () => {
    await expect(a.publish([notice(['x'])])).resolves.toBeUndefined();
    await expect(a.publish([])).resolves.toBeUndefined();
  });

  it('carries a notice from one instance to a subscriber on another, whole', async () => {
    const seen: ProgressNotice[] = [];
    const off = b.subscribe((n) => seen.push(n));
    const n = {
      ...notice(['p-1', 'p-2']),
      type: 'items.failed' as const,
    };
    await deliver(a, seen, n);
    expect(seen.find((s) => s.itemIds[0] === 'p-1')).toEqual(n);
    // and a batch arrives as its notices, in order
    const batch = [notice(['q-1']), notice(['q-2']), notice(['q-3'])];
    await a.publish(batch);
    await waitFor('the batch', async () => seen.some((s) => s.itemIds[0] === 'q-3'));
    const got = seen.filter((s) => s.itemIds[0].startsWith('q-'));
    expect(got.map((s) => s.itemIds[0])).toEqual(['q-1', 'q-2', 'q-3']);
    off();
  });

  it('hands a notice to a subscriber in the publishing instance too', async () => {
    const seen: ProgressNotice[] = [];
    const off = a.subscribe((n) => seen.push(n));
    await deliver(a, seen, notice(['self-1']));
    off();
  });

  it('stops delivering to a subscriber once it unsubscribes', async () => {
    const kept: ProgressNotice[] = [];
    const gone: ProgressNotice[] = [];
    const offKept = b.subscribe((n) => kept.push(n));
    const offGone = b.subscribe((n) => gone.push(n));
    await deliver(a, gone, notice(['before']));
    await waitFor('both saw it', async () => kept.some((s) => s.itemIds[0] === 'before'));
    offGone();
    // The instance delivers to its subscribers together: once the one still subscribed has
    // the marker, the other would have it too.
    await deliver(a, kept, notice(['after']));
    expect(gone.map((s) => s.itemIds[0])).not.toContain('after');
    offKept();
  });
});
