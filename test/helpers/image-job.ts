import pino from 'pino';
import { FairShare } from '../../src/jobs/fair-share';
import { ProcessImageHandler, type ImageJobDeps } from '../../src/jobs/process-image';
import { Slots } from '../../src/lib/slots';
import { PlanReads } from '../../src/services/plans';

/** What a test analyzer answers for any image. */
export const FEATURES = { width: 1, height: 1, format: 'png', vector: [1], embedder: 'e1' };

/**
 * A worker's image-job handler for unit tests: organisation `o1` on an unlimited plan, an
 * analyzer answering FEATURES, 64 slots, a silent log; each test passes what it plays.
 * Plans are read through `accounts` (the test's own when it passes one).
 */
export function imageJobHandler(over: Partial<ImageJobDeps> = {}): ProcessImageHandler {
  const accounts =
    over.accounts ??
    ({
      getDatasetById: async () => ({ org: 'o1' }),
      getOrg: async (name: string) => ({ name, plan: { images: { limitType: 'unlimited' } } }),
    } as never);
  const now = over.now ?? Date.now;
  return new ProcessImageHandler({
    store: {} as never,
    accounts,
    plans: new PlanReads(accounts, now),
    ledger: {} as never,
    fetcher: {} as never,
    analyzer: { analyze: async () => FEATURES } as never,
    log: pino({ level: 'silent' }),
    now,
    retryBaseMs: 10,
    embedderId: 'e1',
    fair: new FairShare(64),
    imageSlots: new Slots(64),
    ...over,
  });
}
