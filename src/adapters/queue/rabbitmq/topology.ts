import type { Channel, ChannelModel } from 'amqplib';
import type { Logger } from 'pino';

/**
 * Redeliveries of one message (its consumer died or its channel closed before the ack) before
 * the broker dead-letters it: a job that crashes every worker that takes it must not take the
 * fleet down forever.
 */
const DELIVERY_LIMIT = 5;

export interface QueueNames {
  jobs: string;
  dead: string;
  retry(delayMs: number): string;
}

export function queueNames(prefix: string): QueueNames {
  return {
    jobs: `${prefix}jobs`,
    dead: `${prefix}jobs.dead`,
    retry: (delayMs) => `${prefix}jobs.retry.${delayMs}ms`,
  };
}

/**
 * Which queue types the broker makes. Quorum queues (replicated, fsynced, delivery counting)
 * exist from RabbitMQ 3.8; per-queue message TTL on them, which the retry queues need, from
 * 3.10 (expiry is driven by a timer that the queue leader re-arms after a restart, so a lone
 * message in an idle retry queue still expires on time). Older brokers get classic durable
 * queues. A broker that refuses quorum queues anyway (3.8/3.9 with the `quorum_queue` feature
 * flag off) is found out on the first declaration; see {@link QuorumRefused}.
 */
export interface QueueSupport {
  quorum: boolean;
  quorumTtl: boolean;
  /** Queues already reported as kept in an older shape, so a reconnect does not warn again. */
  reported: Set<string>;
}

export function queueSupport(conn: ChannelModel, log: Logger): QueueSupport {
  const { product, version } = conn.connection.serverProperties;
  const support: QueueSupport = { quorum: true, quorumTtl: true, reported: new Set() };
  const m = /^(\d+)\.(\d+)/.exec(version ?? '');
  // Only RabbitMQ's own version numbers mean anything here; other brokers are tried as they are.
  if (product !== 'RabbitMQ' || !m) return support;
  const v = Number(m[1]) * 1000 + Number(m[2]);
  support.quorum = v >= 3008;
  support.quorumTtl = v >= 3010;
  if (!support.quorum)
    log.warn({ version }, 'RabbitMQ before 3.8 has no quorum queues; using classic durable queues');
  else if (!support.quorumTtl)
    log.warn(
      { version },
      'RabbitMQ before 3.10 has no message TTL on quorum queues; retry queues are classic',
    );
  return support;
}

/**
 * The broker closed the whole connection when asked for a quorum queue (RabbitMQ 3.8/3.9 answer
 * a disabled `quorum_queue` feature flag with a connection error). The caller reconnects with
 * `quorum` and `quorumTtl` turned off.
 */
export class QuorumRefused extends Error {
  constructor(queue: string, cause: unknown) {
    super(`the broker refused the quorum queue ${queue} and closed the connection`, { cause });
  }
}

/**
 * The work queue counts redeliveries, which gives the crash-loop limit above; poison messages
 * go to the dead queue. Both are quorum queues where the broker supports them (replicated and
 * fsynced by the broker), else classic durable queues.
 */
export async function declareTopology(
  conn: ChannelModel,
  names: QueueNames,
  support: QueueSupport,
  log: Logger,
): Promise<void> {
  await declareQueue(conn, names.dead, support.quorum, {}, {}, support, log);
  await declareQueue(
    conn,
    names.jobs,
    support.quorum,
    { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': names.dead },
    { 'x-delivery-limit': DELIVERY_LIMIT },
    support,
    log,
  );
}

/**
 * Delayed retries without a plugin: one queue per delay whose messages expire after exactly
 * that delay and are dead-lettered back onto the work queue. One TTL per queue keeps expiry
 * in FIFO order, so nothing waits behind a longer delay. Quorum where the broker has message
 * TTL on quorum queues (RabbitMQ ≥ 3.10): a retry waiting out its delay then survives a broker
 * restart like the job it came from. Dead-lettering stays at-most-once, as it was with classic
 * queues; a message lost there leaves its item unfinished in the store, where the sweep of
 * unfinished items queues it again.
 */
export async function declareRetryQueue(
  conn: ChannelModel,
  names: QueueNames,
  delayMs: number,
  support: QueueSupport,
  log: Logger,
): Promise<string> {
  const name = names.retry(delayMs);
  await declareQueue(
    conn,
    name,
    support.quorumTtl,
    {
      'x-message-ttl': delayMs,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': names.jobs,
    },
    {},
    support,
    log,
  );
  return name;
}

/** AMQP reply codes of a channel the broker closed because it refused what was asked. */
const CHANNEL_REFUSALS = new Set([403, 404, 405, 406]);
/** ... and of a whole connection (not-allowed, not-implemented, internal-error). */
const CONNECTION_REFUSALS = new Set([530, 540, 541]);

/**
 * Declares one durable queue on a channel of its own: a refused declaration closes the channel
 * it was made on, and the caller's channels must survive that. A queue that already exists in
 * another shape (e.g. a classic dead queue made by an older version of this service, before
 * it became a quorum queue) is kept as it is, with a warning: the broker cannot change a
 * queue's type in place, and deleting it would drop the messages in it. To convert one, drain
 * it and delete it while the service is stopped; the next start declares it anew.
 */
async function declareQueue(
  conn: ChannelModel,
  name: string,
  quorum: boolean,
  args: Record<string, unknown>,
  quorumArgs: Record<string, unknown>,
  support: QueueSupport,
  log: Logger,
): Promise<void> {
  const shape = quorum ? { 'x-queue-type': 'quorum', ...quorumArgs, ...args } : args;
  // A connection-level refusal is emitted on the connection before the declaration fails;
  // without a listener here it would be an unhandled 'error' event.
  let connErr: (Error & { code?: number }) | undefined;
  const onConnErr = (e: Error): void => {
    connErr = e;
  };
  conn.on('error', onConnErr);
  try {
    await onOwnChannel(conn, (ch) => ch.assertQueue(name, { durable: true, arguments: shape }));
    return;
  } catch (err) {
    if (connErr) {
      if (quorum && CONNECTION_REFUSALS.has(connErr.code ?? 0))
        throw new QuorumRefused(name, connErr);
      throw err;
    }
    if (!CHANNEL_REFUSALS.has((err as { code?: number }).code ?? 0)) throw err;
    const exists = await onOwnChannel(conn, (ch) => ch.checkQueue(name)).then(
      () => true,
      (e: { code?: number }) => {
        if (e.code === 404) return false;
        throw e;
      },
    );
    if (exists) {
      if (!support.reported.has(name)) {
        support.reported.add(name);
        log.warn(
          { err, queue: name, wanted: quorum ? 'quorum' : 'classic' },
          'the queue exists with other arguments (made by an older version?); keeping it as it is',
        );
      }
      return;
    }
    if (!quorum) throw err;
    log.warn(
      { err, queue: name },
      'the broker refused a quorum queue; declaring a classic durable one',
    );
    await onOwnChannel(conn, (ch) => ch.assertQueue(name, { durable: true, arguments: args }));
  } finally {
    conn.off('error', onConnErr);
  }
}

async function onOwnChannel<T>(conn: ChannelModel, fn: (ch: Channel) => Promise<T>): Promise<T> {
  const ch = await conn.createChannel();
  ch.on('error', () => undefined); // the failed operation reports it
  try {
    return await fn(ch);
  } finally {
    await ch.close().catch(() => undefined);
  }
}
