import type { Logger } from 'pino';
import type { ItemCountsRollup } from '../ports/item-counts';

/**
 * How often a worker asks whether a roll-up pass is due (real time). The pass itself runs at
 * most once per popularityPassMs of the installation's clock, whichever process asks first; a
 * question that finds none due costs one read of the roll-up state.
 */
const TICK_MS = 2000;

/**
 * Keeps items' popularity and purchases in step with the event log in the background (contract
 * §14): every worker runs it, and the port makes concurrent passes harmless. One pass at a time
 * per process; a failed pass is logged and the next tick tries again.
 */
export function startPopularityRollup(
  counts: ItemCountsRollup,
  now: () => number,
  log: Logger,
  tickMs = TICK_MS,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const tick = (): void => {
    running ??= counts
      .rollUp(now())
      .then((pass) => {
        if (pass?.changed) log.debug(pass, 'popularity roll-up pass');
      })
      .catch((err: unknown) => log.warn({ err }, 'popularity roll-up pass failed; retried soon'))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  tick();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
