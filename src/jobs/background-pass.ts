import type { Logger } from 'pino';

/** A pass over every dataset that a worker runs now and then (one process holds its lease). */
export interface BackgroundPass {
  pass(): Promise<unknown>;
  /** Stops a running pass at its next safe point (a process shutting down). */
  halt(): void;
}

/**
 * Runs a pass every `tickMs` in the background of a worker, one at a time per process; a
 * failed pass is logged and the next tick tries again. `stop` halts it and waits for it.
 */
export function startBackgroundPass(
  pass: BackgroundPass,
  log: Logger,
  tickMs: number,
  what: string,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const tick = (): void => {
    running ??= pass
      .pass()
      .then(() => undefined)
      .catch((err: unknown) => log.warn({ err }, `${what} failed; retried soon`))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      pass.halt();
      await running;
    },
  };
}
