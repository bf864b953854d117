import type { Logger } from 'pino';
import { DELIVERY_LOG } from '../domain/webhook';
import type { EventOutbox } from '../ports/event-outbox';
import type { UsageThresholds } from '../services/usage-thresholds';
import type { WebhookDirectory } from '../services/webhook-directory';
import type { OutboxBatcher } from './outbox-batcher';
import type { WebhookDeliverer } from './webhook-deliverer';

/** How often a worker batches facts (if it holds the lease) and looks for due deliveries. */
const BATCH_EVERY_MS = 1000;
const LOOK_EVERY_MS = 1000;
/** The lease holder's housekeeping: usage thresholds swept, delivery logs pruned. */
const SWEEP_EVERY_MS = 60_000;

/** A loop that runs `step` every `everyMs`, one step at a time, and on `kick()`. */
function loop(step: () => Promise<void>, everyMs: number, log: Logger, what: string) {
  let running: Promise<void> | undefined;
  let again = false;
  const run = (): void => {
    if (running) {
      again = true;
      return;
    }
    running = step()
      .catch((err: unknown) => log.warn({ err }, `${what} failed; tried again soon`))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          run();
        }
      });
  };
  const timer = setInterval(run, everyMs);
  timer.unref();
  return {
    kick: run,
    async stop() {
      clearInterval(timer);
      again = false;
      await running;
    },
  };
}

/**
 * A worker's share of events out (contract §17): every worker batches when it holds the lease
 * and attempts due deliveries, so any of them carries on when another dies.
 */
export function startWebhookWork(deps: {
  batcher: OutboxBatcher;
  deliverer: WebhookDeliverer;
  thresholds: UsageThresholds;
  outbox: EventOutbox;
  directory: WebhookDirectory;
  now: () => number;
  log: Logger;
}): { kick(): void; stop(): Promise<void> } {
  const { log } = deps;
  const deliver = loop(
    async () => {
      // look again at once only while a backlog is left, which then drains at the in-flight
      // bound; otherwise the next tick, or a kick from the batcher, looks
      for (let i = 0; i < 20 && (await deps.deliverer.look()); i++);
    },
    LOOK_EVERY_MS,
    log,
    'webhook delivery',
  );
  let sweptAt = -Infinity;
  const batch = loop(
    async () => {
      if (!(await deps.batcher.pass())) return;
      if (deps.now() - sweptAt < SWEEP_EVERY_MS) return;
      sweptAt = deps.now();
      await deps.thresholds.sweep();
      for (const w of await deps.directory.active()) await deps.outbox.prune(w.id, DELIVERY_LOG);
    },
    BATCH_EVERY_MS,
    log,
    'webhook batching',
  );
  batch.kick();
  deliver.kick();
  return {
    kick: deliver.kick,
    async stop() {
      await Promise.all([batch.stop(), deliver.stop()]);
      await deps.thresholds.drain();
    },
  };
}
