import type { Channel } from 'amqplib';

/**
 * Redeliveries of one message (its consumer died or its channel closed before the ack) before
 * the broker dead-letters it: a job that crashes every worker that takes it must not take the
 * fleet down forever.
 */
export const DELIVERY_LIMIT = 5;

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
 * The work queue is a quorum queue: replicated and fsynced by the broker, and it counts
 * redeliveries, which gives the crash-loop limit above. Poison messages go to the dead queue.
 */
export async function declareTopology(ch: Channel, names: QueueNames): Promise<void> {
  await ch.assertQueue(names.dead, { durable: true });
  await ch.assertQueue(names.jobs, {
    durable: true,
    arguments: {
      'x-queue-type': 'quorum',
      'x-delivery-limit': DELIVERY_LIMIT,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': names.dead,
    },
  });
}

/**
 * Delayed retries without a plugin: one queue per delay whose messages expire after exactly
 * that delay and are dead-lettered back onto the work queue. One TTL per queue keeps expiry
 * in FIFO order, so nothing waits behind a longer delay.
 */
export async function declareRetryQueue(
  ch: Channel,
  names: QueueNames,
  delayMs: number,
): Promise<string> {
  const name = names.retry(delayMs);
  await ch.assertQueue(name, {
    durable: true,
    arguments: {
      'x-message-ttl': delayMs,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': names.jobs,
    },
  });
  return name;
}
