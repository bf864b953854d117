import type { Channel, ChannelModel } from 'amqplib';
import type { Logger } from 'pino';
import type { EventBus, ProgressNotice } from '../../../ports/event-bus';
import { connectWithin, withHeartbeat } from './amqp-queue';

const CONNECT_WAIT_MS = 5000;
const RECONNECT_MAX_MS = 10_000;
const DROP_LOG_EVERY_MS = 10_000;
/**
 * A subscriber's queue keeps what it has not read for 10 s and at most 10,000 messages, oldest
 * dropped first: a stalled API process must not grow the broker, and counts heal the gap.
 */
const QUEUE_ARGS = { 'x-message-ttl': 10_000, 'x-max-length': 10_000, 'x-overflow': 'drop-head' };

// Not unref'd, like the job queue's: a reconnect in progress is work the process waits for.
const sleep = (ms: number): Promise<void> =>
  new Promise((r) => {
    setTimeout(r, ms);
  });

/**
 * Progress notices through a fanout exchange: every process with subscribers binds its own
 * server-named, exclusive, auto-delete queue and reads it without acks. Messages are transient
 * and unconfirmed; a notice published while no process listens, or while the broker is away,
 * is dropped and counted, never an error for the worker that published it.
 */
export class AmqpEventBus implements EventBus {
  private readonly exchange: string;
  private conn?: ChannelModel;
  private ch?: Channel;
  private connecting?: Promise<Channel>;
  private consumerTag?: string;
  /** Consumer changes run one at a time, so a subscribe racing an unsubscribe ends consistent. */
  private sync: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<(n: ProgressNotice) => void>();
  private closing = false;
  private reconnecting = false;
  /** Notices lost on publish (no broker); a subscriber's counts heal them. */
  dropped = 0;
  private droppedLoggedAt = 0;

  constructor(
    private readonly url: string,
    /** AMQP_QUEUE_PREFIX, as the job queue's names take it (`vss.` → `vss.events`). */
    prefix: string,
    private readonly log: Logger,
  ) {
    this.exchange = `${prefix}events`;
  }

  async publish(notices: ProgressNotice[]): Promise<void> {
    if (notices.length === 0 || this.closing) return;
    try {
      const ch = await this.channel();
      ch.publish(this.exchange, '', Buffer.from(JSON.stringify(notices)), {
        persistent: false,
        contentType: 'application/json',
      });
    } catch (err) {
      this.dropped += notices.length;
      // a worker flushes every 250 ms: one line per outage window is enough
      if (Date.now() - this.droppedLoggedAt >= DROP_LOG_EVERY_MS) {
        this.droppedLoggedAt = Date.now();
        this.log.warn({ err, dropped: this.dropped }, 'progress notices dropped: no broker');
      }
    }
  }

  subscribe(on: (n: ProgressNotice) => void): () => void {
    const listener = (n: ProgressNotice): void => on(n);
    this.listeners.add(listener);
    this.reconcile();
    return () => {
      if (this.listeners.delete(listener)) this.reconcile();
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    this.listeners.clear();
    await this.sync;
    const conn = this.conn;
    this.conn = undefined;
    this.ch = undefined;
    if (conn) await conn.close().catch(() => undefined);
  }

  private channel(): Promise<Channel> {
    if (this.ch) return Promise.resolve(this.ch);
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async open(): Promise<Channel> {
    const conn = await connectWithin(withHeartbeat(this.url), CONNECT_WAIT_MS);
    try {
      const ch = await conn.createChannel();
      ch.on('error', (err: Error) => this.log.warn({ err }, 'event bus channel error'));
      await ch.assertExchange(this.exchange, 'fanout', { durable: true });
      conn.on('error', (err: Error) => this.log.warn({ err }, 'event bus connection error'));
      conn.on('close', () => this.lost(conn));
      // A channel closed by a protocol error takes its connection along: start afresh.
      ch.on('close', () => {
        if (this.conn === conn) void conn.close().catch(() => undefined);
      });
      if (this.closing) throw new Error('the event bus is closing');
      this.conn = conn;
      this.ch = ch;
      this.consumerTag = undefined;
      this.reconcile();
      return ch;
    } catch (e) {
      await conn.close().catch(() => undefined);
      throw e;
    }
  }

  private lost(conn: ChannelModel): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.ch = undefined;
    this.consumerTag = undefined;
    if (this.closing || this.listeners.size === 0) return;
    this.log.warn('event bus connection lost; reconnecting');
    void this.reconnectLoop();
  }

  private async reconnectLoop(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    try {
      for (let attempt = 0; !this.closing && !this.ch && this.listeners.size > 0; attempt++) {
        await sleep(Math.min(RECONNECT_MAX_MS, 250 * 2 ** attempt));
        if (this.closing || this.ch) return;
        try {
          await this.channel();
        } catch (err) {
          this.log.warn({ err, attempt }, 'event bus: broker still unreachable');
        }
      }
    } finally {
      this.reconnecting = false;
    }
  }

  /** Consumes while there are listeners, and stops (its queue deletes itself) when none are. */
  private reconcile(): void {
    this.sync = this.sync
      .then(async () => {
        if (this.closing) return;
        const want = this.listeners.size > 0;
        if (want && !this.consumerTag) await this.startConsuming();
        else if (!want && this.consumerTag && this.ch) {
          const tag = this.consumerTag;
          this.consumerTag = undefined;
          await this.ch.cancel(tag);
        }
      })
      .catch((err: unknown) => {
        this.log.warn({ err }, 'event bus: could not (un)subscribe; retrying');
        if (this.listeners.size > 0) void this.reconnectLoop();
      });
  }

  private async startConsuming(): Promise<void> {
    const ch = await this.channel();
    if (this.consumerTag) return;
    const { queue } = await ch.assertQueue('', {
      exclusive: true,
      autoDelete: true,
      durable: false,
      arguments: QUEUE_ARGS,
    });
    await ch.bindQueue(queue, this.exchange, '');
    const { consumerTag } = await ch.consume(
      queue,
      (msg) => {
        if (msg) this.deliver(msg.content);
      },
      { noAck: true },
    );
    if (this.ch === ch) this.consumerTag = consumerTag;
  }

  private deliver(body: Buffer): void {
    let notices: ProgressNotice[];
    try {
      notices = JSON.parse(body.toString('utf8')) as ProgressNotice[];
      if (!Array.isArray(notices)) throw new Error('not an array');
    } catch (err) {
      this.log.warn({ err }, 'unreadable progress notice; ignored');
      return;
    }
    for (const n of notices)
      for (const l of this.listeners) {
        try {
          l(n);
        } catch (err) {
          this.log.warn({ err }, 'a progress subscriber failed');
        }
      }
  }
}
