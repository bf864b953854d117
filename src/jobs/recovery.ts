import type { Logger } from 'pino';
import type { EmbedderRef } from '../domain/dataset';
import type { AccountStore } from '../ports/account-store';
import type { ItemProcessing } from '../ports/item-processing';
import type { JobQueue } from '../ports/job-queue';
import { requeueUnfinished } from './process-image';

/** How often an idle worker checks for pending items that have no job. */
const IDLE_SWEEP_MS = 5 * 60_000;
const RETRY_SWEEP_MS = 5000;
const RECENT_SWEEP_MS = 30_000;

/**
 * Items can be pending without a job: the API crashed between its store write and the
 * enqueue, or the broker was unreachable when it enqueued, or a store outage interrupted
 * jobs. The worker re-queues pending items at start, after every outage of the broker or store, and whenever its queue has been idle for a while
 * (so a backlog is never duplicated wholesale). Jobs are idempotent, so overlap is harmless.
 */
export function startRecovery(
  store: ItemProcessing,
  queue: JobQueue,
  log: Logger,
  embedderId: string,
  intervalMs = IDLE_SWEEP_MS,
): { stop(): void; sweep(): Promise<number> } {
  let running: Promise<number> | undefined;
  let again: NodeJS.Timeout | undefined;
  let sweptAt = -Infinity;
  let failedAt = -Infinity;
  const sweep = (): Promise<number> => {
    running ??= requeueUnfinished(store, queue, log, embedderId)
      .then((n) => {
        sweptAt = Date.now();
        clearTimeout(again);
        return n;
      })
      .catch((err: unknown) => {
        // Right after an outage the store may answer a probe but not yet every read.
        failedAt = Date.now();
        log.warn({ err }, `recovery sweep failed; trying again in ${RETRY_SWEEP_MS} ms`);
        clearTimeout(again);
        again = setTimeout(() => void sweep(), RETRY_SWEEP_MS);
        again.unref();
        return 0;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  // When the retry of a sweep that failed during this outage has just succeeded, it already
  // covers the outage's end; a second sweep would only queue every unfinished item twice. A
  // sweep from before the outage (at start) covers nothing of it.
  queue.onRecovered = () => {
    const retriedJustNow = sweptAt >= failedAt && failedAt > Date.now() - RECENT_SWEEP_MS * 10;
    if (!(retriedJustNow && Date.now() - sweptAt < RECENT_SWEEP_MS)) void sweep();
  };
  const timer = setInterval(() => {
    queue.stats().then(
      (s) => {
        if (s.ready + s.delayed + s.running === 0) void sweep();
      },
      () => undefined,
    );
  }, intervalMs);
  timer.unref();
  return {
    sweep,
    stop() {
      clearInterval(timer);
      clearTimeout(again);
      queue.onRecovered = undefined;
    },
  };
}

/**
 * Datasets made with another embedder (or before datasets recorded one) take this one; the
 * recovery sweep then re-embeds their items. Run by workers before their first sweep.
 */
export async function adoptEmbedder(
  accounts: AccountStore,
  embedder: EmbedderRef,
  log: Logger,
): Promise<void> {
  for (const ds of await accounts.adoptEmbedder(embedder))
    log.info(
      { dataset: ds.id, org: ds.org, name: ds.name, from: ds.previous, to: ds.embedder },
      ds.previous
        ? 'embedder changed: the dataset is re-processed'
        : 'the dataset now records its embedder; items without its vectors are re-processed',
    );
}
