import pino from 'pino';
import type { EventOutbox } from '../../src/ports/event-outbox';
import type { UsageLedger } from '../../src/ports/usage-ledger';
import type { PlanReads } from '../../src/services/plans';
import { UsageThresholds } from '../../src/services/usage-thresholds';
import type { WebhookDirectory } from '../../src/services/webhook-directory';

// The stores close right after drain(): a job finishing during shutdown, or a check due at the
// end of an interval, must read nothing from then on (it did, and logged a closed database).
test('after drain, neither a nudge nor a pending end-of-interval check reads anything', async () => {
  jest.useFakeTimers();
  try {
    let now = 0;
    const reads: string[] = [];
    const directory = {
      wanting: async (org: string) => {
        reads.push(org);
        return [];
      },
    } as unknown as WebhookDirectory;
    const t = new UsageThresholds(
      directory,
      {} as EventOutbox,
      {} as UsageLedger,
      {} as PlanReads,
      () => now,
      pino({ level: 'silent' }),
    );
    t.nudge('acme', 'images');
    await jest.advanceTimersByTimeAsync(0);
    expect(reads).toEqual(['acme']);
    now = 100;
    t.nudge('acme', 'images'); // within the interval: a check is due at its end
    await t.drain();
    now = 5_000;
    t.nudge('acme', 'images');
    t.nudge('other', 'credits');
    await jest.advanceTimersByTimeAsync(5_000);
    await t.drain();
    expect(reads).toEqual(['acme']);
  } finally {
    jest.useRealTimers();
  }
});
