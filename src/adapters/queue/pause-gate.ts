import type { Logger } from 'pino';

const FIRST_PROBE_MS = 500;
const MAX_PROBE_MS = 5000;

/**
 * Stops a consumer while a dependency is down and starts it again once a probe answers, then
 * tells the worker (which re-queues unfinished items at once rather than at the next idle
 * sweep). One pause at a time: every job failing for the same outage joins it.
 */
export class PauseGate {
  private isPaused = false;
  private stopped = false;

  constructor(
    private readonly probe: () => Promise<void>,
    private readonly log: Logger,
    private readonly onPause: () => Promise<void> | void,
    private readonly onResume: () => Promise<void> | void,
  ) {}

  get paused(): boolean {
    return this.isPaused;
  }

  pause(reason: string): void {
    if (this.isPaused || this.stopped) return;
    this.isPaused = true;
    this.log.warn({ reason }, 'a dependency is unavailable; the worker stops taking jobs');
    void this.waitForProbe().catch((err: unknown) =>
      this.log.error({ err }, 'could not resume taking jobs'),
    );
  }

  private async waitForProbe(): Promise<void> {
    await this.onPause();
    const since = Date.now();
    for (let attempt = 0; !this.stopped; attempt++) {
      await new Promise((r) =>
        setTimeout(r, Math.min(MAX_PROBE_MS, FIRST_PROBE_MS * 2 ** attempt)),
      );
      if (this.stopped) return;
      try {
        await this.probe();
      } catch {
        continue;
      }
      this.log.info({ pausedMs: Date.now() - since }, 'the dependency answers again; taking jobs');
      this.isPaused = false;
      await this.onResume();
      return;
    }
  }

  stop(): void {
    this.stopped = true;
  }
}
