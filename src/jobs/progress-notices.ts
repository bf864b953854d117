import type { Logger } from 'pino';
import type { EventBus, ProgressNotice } from '../ports/event-bus';
import type { ItemOutcome, OutcomeSink } from './item-outcomes';

/** A batch waits at most this long for more ids… */
const LINGER_MS = 250;
/** …and goes at once when it holds this many. */
const MAX_IDS = 1000;

interface Batch {
  notice: ProgressNotice;
  timer: NodeJS.Timeout;
}

/**
 * The worker's side of live progress: outcomes collected per dataset and kind and published on
 * the bus in batches, after LINGER_MS or at MAX_IDS ids. `record` never waits for the bus, so
 * a job is never held up by live subscribers; a lost notice heals with the next one's counts.
 */
export class ProgressNotices implements OutcomeSink {
  private readonly batches = new Map<string, Batch>();
  private readonly sending = new Set<Promise<void>>();

  constructor(
    private readonly bus: EventBus,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async record(o: ItemOutcome): Promise<void> {
    const type = o.kind === 'processed' ? 'items.processed' : 'items.failed';
    const key = `${o.datasetId}\u0000${type}`;
    let batch = this.batches.get(key);
    if (!batch) {
      const notice: ProgressNotice = {
        org: o.org,
        datasetId: o.datasetId,
        type,
        itemIds: [],
        at: 0,
      };
      const timer = setTimeout(() => this.flush(key), LINGER_MS);
      timer.unref();
      this.batches.set(key, (batch = { notice, timer }));
    }
    batch.notice.itemIds.push(o.itemId);
    if (batch.notice.itemIds.length >= MAX_IDS) this.flush(key);
  }

  /** Sends what is collected and waits for the sends in progress. */
  async close(): Promise<void> {
    for (const key of [...this.batches.keys()]) this.flush(key);
    await Promise.allSettled([...this.sending]);
  }

  private flush(key: string): void {
    const batch = this.batches.get(key);
    if (!batch) return;
    this.batches.delete(key);
    clearTimeout(batch.timer);
    // When the batch leaves: every item in it was recorded in the store by then.
    const notice = { ...batch.notice, at: this.now() };
    const p = this.bus
      .publish([notice])
      .catch((err: unknown) => this.log.warn({ err }, 'progress notice not published'))
      .finally(() => this.sending.delete(p));
    this.sending.add(p);
  }
}
