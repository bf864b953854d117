import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from 'amqplib';
import type { ConsumeMessage } from 'amqplib';
import { once } from 'node:events';
import type { Logger } from 'pino';
import { AppError } from '../../../domain/errors';
import type { ProcessingJob } from '../../../domain/item';
import type { JobHandler, JobQueue, QueueStats } from '../../../ports/job-queue';
import { PauseGate } from '../pause-gate';
import { delayOf, nextRun, readyAgainAt, settlementFor } from '../../../domain/retry-rule';
import {
  QuorumRefused,
  declareRetryQueue,
  declareTopology,
  queueNames,
  queueSupport,
  type QueueNames,
  type QueueSupport,
} from './topology';

/** How long `enqueue` waits for a broker connection before giving up with 503. */
const CONNECT_WAIT_MS = 5000;
/** Publishes of a job being put back before it is returned to the broker instead. */
const PUT_BACK_TRIES = 3;
/** Message header: epoch ms when the job becomes runnable. */
const READY_AT = 'x-ready-at';
const RECONNECT_MAX_MS = 10_000;

interface Session {
  conn: ChannelModel;
  pub: ConfirmChannel;
  consumer?: Channel;
  consumerStarting?: Promise<void>;
  retryQueues: Set<string>;
}

// Not unref'd: while the broker is away, a worker process has nothing else keeping it alive.
const sleep = (ms: number): Promise<void> =>
  new Promise((r) => {
    setTimeout(r, ms);
  });

/**
 * RabbitMQ job queue. `enqueue` resolves only after the broker confirmed every message
 * (persistent, on a quorum queue), so a 202 never rests on a message the broker might drop.
 * Consumers ack manually after the handler finished; a worker that dies leaves its messages
 * unacked and the broker hands them to another worker. The connection is re-established after
 * a broker restart, and exactly one consumer is re-registered on the new connection.
 */
export class AmqpJobQueue implements JobQueue {
  private readonly names: QueueNames;
  /** Learnt from the first connection (broker version) and from refused declarations. */
  private support?: QueueSupport;
  private session?: Session;
  private connecting?: Promise<Session>;
  private closing = false;
  private consumeWith?: { handler: JobHandler; concurrency: number };
  private consumerTag?: string;
  private readonly inFlight = new Set<Promise<void>>();
  private gate?: PauseGate;
  /** Called after a reconnection or a pause, e.g. to re-queue items an outage left behind. */
  onRecovered?: () => void;

  /** The last job a consumer was given: when it became runnable. */
  private lastGiven?: { readyAt: number };
  /** While paused: when the oldest job this process put back to wait became runnable. */
  private waitingSince?: number;

  constructor(
    private readonly url: string,
    prefix: string,
    private readonly log: Logger,
    /** First delay after an unexpected handler error; later ones double. */
    private readonly unexpectedRetryBaseMs = 1000,
    /** When jobs become runnable and how long they waited (x-ready-at, oldestReadyAgeMs). */
    private readonly now: () => number = Date.now,
  ) {
    this.names = queueNames(prefix);
  }

  /** Connects once, failing fast: start-up should say plainly that the broker is unreachable. */
  async start(): Promise<void> {
    await this.connect();
  }

  private connect(): Promise<Session> {
    if (this.session) return Promise.resolve(this.session);
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async open(): Promise<Session> {
    const conn = await connectWithin(withHeartbeat(this.url), CONNECT_WAIT_MS);
    // Each queue declaration listens for a refusal on the connection while it runs
    // (topology.ts), and retry queues of several delays may be declared at once: more than
    // Node's default of 10 is expected, not a leak.
    conn.setMaxListeners(64);
    const support = (this.support ??= queueSupport(conn, this.log));
    try {
      const pub = await conn.createConfirmChannel();
      await declareTopology(conn, this.names, support, this.log);
      const session: Session = { conn, pub, retryQueues: new Set() };
      conn.on('error', (err: Error) => this.log.warn({ err }, 'broker connection error'));
      conn.on('close', () => this.lost(session));
      // A channel error (e.g. a failed declaration) closes just that channel; start afresh.
      pub.on('error', (err: Error) => this.log.warn({ err }, 'publish channel error'));
      pub.on('close', () => {
        if (this.session === session) void conn.close().catch(() => undefined);
      });
      this.session = session;
      if (this.consumeWith) await this.startConsumer(session);
      this.log.info({ queue: this.names.jobs }, 'connected to broker');
      return session;
    } catch (e) {
      await conn.close().catch(() => undefined);
      if (e instanceof QuorumRefused && support.quorum) {
        this.log.warn({ err: e }, 'the broker refuses quorum queues; using classic durable queues');
        support.quorum = false;
        support.quorumTtl = false;
        return this.open();
      }
      throw e;
    }
  }

  private lost(session: Session): void {
    if (this.session !== session) return;
    this.session = undefined;
    this.consumerTag = undefined;
    if (this.closing) return;
    this.log.warn('broker connection lost; reconnecting');
    void this.reconnectLoop();
  }

  private async reconnectLoop(): Promise<void> {
    for (let attempt = 0; !this.closing && !this.session; attempt++) {
      await sleep(Math.min(RECONNECT_MAX_MS, 250 * 2 ** attempt));
      if (this.closing || this.session) return;
      try {
        await this.connect();
        this.onRecovered?.();
        return;
      } catch (err) {
        this.log.warn({ err, attempt }, 'broker still unreachable');
      }
    }
  }

  /** Waits briefly for a connection so a blip during a broker restart does not fail writes. */
  private async ready(): Promise<Session> {
    if (this.session) return this.session;
    if (this.closing) throw new AppError('unavailable', 'the job queue is shutting down');
    const deadline = Date.now() + CONNECT_WAIT_MS;
    let cause: unknown;
    while (Date.now() < deadline) {
      try {
        return await this.connect();
      } catch (e) {
        cause = e;
        await sleep(200);
      }
    }
    // the operator needs to know why (refused, DNS, credentials); the client never sees it
    throw new AppError('unavailable', 'the job queue (RabbitMQ) is unreachable', undefined, 5, {
      cause,
    });
  }

  async enqueue(jobs: ProcessingJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const { pub } = await this.ready();
    await this.publish(pub, this.names.jobs, jobs);
  }

  /** `readyAt`: when the jobs become runnable (later for a retry queue). */
  private async publish(
    pub: ConfirmChannel,
    queue: string,
    jobs: ProcessingJob[],
    readyAt = this.now(),
  ): Promise<void> {
    // Each message's own confirmation: waitForConfirms would also fail on another caller's
    // nack on this shared channel, and a put-back would then be published twice.
    const confirmed: Array<Promise<void>> = [];
    for (const job of jobs) {
      let ok = true;
      confirmed.push(
        new Promise<void>((resolve, reject) => {
          ok = pub.sendToQueue(
            queue,
            Buffer.from(JSON.stringify(job)),
            {
              persistent: true,
              contentType: 'application/json',
              // when the job becomes runnable, for queue_oldest_job_age_seconds
              headers: { [READY_AT]: readyAt },
            },
            (err) =>
              err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(),
          );
        }),
      );
      if (!ok) await Promise.race([once(pub, 'drain'), once(pub, 'close')]);
    }
    await Promise.all(confirmed);
  }

  async consume(
    handler: JobHandler,
    concurrency: number,
    probe?: () => Promise<void>,
  ): Promise<void> {
    this.consumeWith = { handler, concurrency };
    if (probe)
      this.gate = new PauseGate(
        probe,
        this.log,
        () => this.unsubscribe(),
        async () => {
          this.waitingSince = undefined;
          const session = this.session;
          if (session?.consumer && !this.consumerTag)
            await this.subscribe(session, session.consumer);
          this.onRecovered?.();
        },
      );
    await this.startConsumer(await this.ready());
  }

  /**
   * Messages in flight stay on the channel and are settled by their handlers; the broker
   * delivers nothing new until `subscribe`.
   */
  private async unsubscribe(): Promise<void> {
    const ch = this.session?.consumer;
    const tag = this.consumerTag;
    this.consumerTag = undefined;
    if (ch && tag) await ch.cancel(tag).catch(() => undefined);
  }

  /** Idempotent per session, so a reconnect and a restart can never add a second consumer. */
  private startConsumer(session: Session): Promise<void> {
    if (session.consumer) return Promise.resolve();
    session.consumerStarting ??= this.openConsumer(session).finally(() => {
      session.consumerStarting = undefined;
    });
    return session.consumerStarting;
  }

  private async openConsumer(session: Session): Promise<void> {
    const { concurrency } = this.consumeWith!;
    const ch = await session.conn.createChannel();
    ch.on('error', (err: Error) => this.log.warn({ err }, 'consumer channel error'));
    // A channel can close alone (a protocol error); keep exactly one consumer on this session.
    ch.on('close', () => {
      if (session.consumer !== ch) return;
      session.consumer = undefined;
      this.consumerTag = undefined;
      if (this.session === session && this.consumeWith && !this.closing)
        void sleep(500).then(() => {
          if (this.session === session && this.consumeWith && !session.consumer)
            return this.startConsumer(session).catch((err: unknown) =>
              this.log.warn({ err }, 'could not restart the consumer'),
            );
        });
    });
    await ch.prefetch(concurrency);
    session.consumer = ch;
    if (!this.gate?.paused) await this.subscribe(session, ch);
  }

  private async subscribe(session: Session, ch: Channel): Promise<void> {
    const { handler } = this.consumeWith!;
    const { consumerTag } = await ch.consume(
      this.names.jobs,
      (msg) => {
        if (!msg) return; // cancelled by the broker (queue deleted); the reconnect re-consumes
        const p = this.handle(session, ch, msg, handler).finally(() => this.inFlight.delete(p));
        this.inFlight.add(p);
      },
      { noAck: false },
    );
    this.consumerTag = consumerTag;
  }

  private async handle(
    session: Session,
    ch: Channel,
    msg: ConsumeMessage,
    handler: JobHandler,
  ): Promise<void> {
    const header = Number(msg.properties.headers?.[READY_AT]);
    const readyAt = Number.isFinite(header) ? header : this.now();
    this.lastGiven = { readyAt };
    let job: ProcessingJob;
    try {
      job = parseJob(msg.content);
    } catch (err) {
      this.log.error({ err }, 'unreadable job message; dead-lettered');
      this.settle(ch, msg, false);
      return;
    }
    try {
      await handler(job);
      this.settle(ch, msg, true);
    } catch (e) {
      const next = settlementFor(e, job.attempt, this.unexpectedRetryBaseMs);
      if (next.kind === 'dead') {
        this.log.error({ err: e, job }, 'job failed repeatedly; dead-lettered');
        this.settle(ch, msg, false);
        return;
      }
      // A requeue (nack) would count towards the broker's delivery limit, so a job put back
      // is published afresh: a wait gated by a probe straight to the work queue, anything
      // else through the retry queue of its delay.
      if (next.kind === 'wait' && this.gate) {
        this.waitingSince = Math.min(this.waitingSince ?? readyAt, readyAt);
        this.gate.pause(next.reason);
      } else if (next.kind === 'retry' && next.unexpected)
        this.log.warn({ err: e, job }, 'job failed unexpectedly; will retry');
      const delay = delayOf(next, !!this.gate);
      const again = readyAgainAt(next, !!this.gate, readyAt, this.now());
      for (let attempt = 1; ; attempt++) {
        try {
          const queue = delay === 0 ? this.names.jobs : await this.retryQueue(session, delay);
          await this.publish(session.pub, queue, [nextRun(job, next)], again);
          this.settle(ch, msg, true);
          return;
        } catch (err) {
          // A publish the broker refuses (a nack; seen under load) is tried again; an unacked
          // original would otherwise sit on this channel until it closes, and the job with it.
          if (attempt < PUT_BACK_TRIES && this.session === session) {
            await sleep(250 * attempt);
            continue;
          }
          this.log.warn({ err, job }, 'could not put the job back; handing it back to the broker');
          try {
            ch.nack(msg, false, true); // counts one delivery; better than a job held forever
          } catch {
            // the channel is gone: the broker redelivers its unacked messages itself
          }
          return;
        }
      }
    }
  }

  private async retryQueue(session: Session, delayMs: number): Promise<string> {
    const name = this.names.retry(delayMs);
    if (!session.retryQueues.has(name)) {
      const support = this.support!;
      try {
        await declareRetryQueue(session.conn, this.names, delayMs, support, this.log);
      } catch (e) {
        // The connection is gone with it; the next session declares classic retry queues.
        if (e instanceof QuorumRefused) support.quorumTtl = false;
        throw e;
      }
      session.retryQueues.add(name);
    }
    return name;
  }

  /** Ack, or reject to the dead queue. A closed channel means the broker redelivers anyway. */
  private settle(ch: Channel, msg: ConsumeMessage, ok: boolean): void {
    try {
      if (ok) ch.ack(msg);
      else ch.nack(msg, false, false);
    } catch (err) {
      this.log.debug({ err }, 'could not settle a message on a closed channel');
    }
  }

  async stop(): Promise<void> {
    this.consumeWith = undefined;
    this.gate?.stop();
    const ch = this.session?.consumer;
    if (ch && this.consumerTag) {
      await ch.cancel(this.consumerTag).catch(() => undefined);
      this.consumerTag = undefined;
    }
    await Promise.allSettled([...this.inFlight]);
  }

  async stats(): Promise<QueueStats> {
    const { conn } = await this.ready();
    // A passive check of a missing queue closes its channel, so each check gets its own.
    const ch = await conn.createChannel();
    ch.on('error', () => undefined);
    try {
      const jobs = await ch.checkQueue(this.names.jobs);
      const dead = await ch.checkQueue(this.names.dead);
      let delayed = 0;
      for (const name of this.session?.retryQueues ?? [])
        delayed += (await ch.checkQueue(name)).messageCount;
      return {
        ready: jobs.messageCount,
        delayed,
        running: this.inFlight.size,
        dead: dead.messageCount,
        ...(this.consumeWith ? { oldestReadyAgeMs: this.oldestAge(jobs.messageCount) } : {}),
      };
    } finally {
      await ch.close().catch(() => undefined);
    }
  }

  /**
   * See QueueStats.oldestReadyAgeMs. The broker shows no message without delivering it, so the
   * age is inferred from what this process was given: jobs queue in the order they became
   * runnable, so the head became runnable no earlier than the last job given. A job put back to
   * wait keeps its time (readyAgainAt) but joins the tail; while paused, it is the oldest
   * waiting. An upper bound, exact when one worker consumes.
   */
  private oldestAge(ready: number): number | undefined {
    if (ready === 0) return 0;
    const putBack = this.gate?.paused ? this.waitingSince : undefined;
    const since = Math.min(this.lastGiven?.readyAt ?? Infinity, putBack ?? Infinity);
    // Given nothing yet (a moment after start): how long the head waited before is unknown,
    // and a guess from this process's start could be far too low.
    return since === Infinity ? undefined : this.now() - since;
  }

  async ping(): Promise<void> {
    if (!this.session) throw new AppError('unavailable', 'not connected to RabbitMQ');
  }

  async close(): Promise<void> {
    await this.stop();
    this.closing = true;
    const s = this.session;
    this.session = undefined;
    if (s) await s.conn.close().catch(() => undefined);
  }
}

/** Heartbeats let a worker notice a broker that vanished without closing the socket. */
export function withHeartbeat(url: string): string {
  const u = new URL(url);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', '15');
  return u.toString();
}

/**
 * amqplib's `timeout` covers only the TCP connect; a broker that is starting or stopping can
 * accept the socket and never finish the handshake. Bound the whole thing, and close a
 * connection that arrives too late.
 */
export async function connectWithin(url: string, ms: number): Promise<ChannelModel> {
  const pending = amqp.connect(url, { timeout: ms });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no AMQP handshake within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([pending, timeout]);
  } catch (e) {
    pending.then((c) => c.close()).catch(() => undefined);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

function parseJob(body: Buffer): ProcessingJob {
  const j = JSON.parse(body.toString('utf8')) as Partial<ProcessingJob>;
  if (
    typeof j.datasetId !== 'string' ||
    typeof j.itemId !== 'string' ||
    typeof j.url !== 'string' ||
    typeof j.attempt !== 'number'
  )
    throw new Error('job message lacks datasetId, itemId, url or attempt');
  return j as ProcessingJob;
}
