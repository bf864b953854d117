import type { Logger } from 'pino';
import { statusOf, type DatasetCounts, type DatasetStatus } from '../domain/dataset';
import type { EventBus, ProgressNotice } from '../ports/event-bus';
import type { AuthService } from './auth';
import type { Principal } from './principal';

export type DatasetEventType = 'items.processed' | 'items.failed' | 'dataset.published';

/** One event of a dataset's live progress (contract §17), with its counts after the event. */
export interface DatasetEventView {
  type: DatasetEventType;
  itemIds: string[];
  counts: DatasetCounts;
  status: DatasetStatus;
}

/**
 * A dataset's counts as GET dataset shows them (the content store's `counts`), passed in by the
 * composition root: this service reads nothing else of a dataset's content.
 */
export type CountsReader = (datasetId: string) => Promise<DatasetCounts>;

/** A dataset's counts are read at most this often on one host, whatever its subscribers. */
const READ_EVERY_MS = 250;
/** Events a subscriber may have waiting; beyond, item events are merged into waiting ones. */
const MAX_QUEUED = 100;
const MAX_IDS = 1000;

export interface DatasetEventsOptions {
  /**
   * How long after a write the engine's counts show it: Elasticsearch item indices refresh each
   * second (about 1,100 ms), the embedded engine at once (0). Counts are read no sooner, so an
   * event's counts include its items.
   */
  visibilityLagMs: number;
  log: Logger;
  now?: () => number;
  /** At most one counts read per dataset this often (250 ms). */
  readEveryMs?: number;
}

/**
 * Live progress of datasets for subscriptions: one bus subscription per process, fanned out
 * to the streams of each dataset. Counts are absolute, so an event lost on the bus or merged
 * for a slow subscriber heals with the next one.
 */
export class DatasetEventsService {
  private readonly watches = new Map<string, DatasetWatch>();
  private unsubscribe?: () => void;
  private readonly now: () => number;

  constructor(
    private readonly auth: AuthService,
    private readonly readCounts: CountsReader,
    private readonly bus: EventBus,
    private readonly opts: DatasetEventsOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * The events of one dataset from now on, for its organisation's token; ends on `return()`.
   * Authorised before it resolves, so a refusal is an error of the subscription itself.
   */
  async stream(p: Principal, org: string, name: string): Promise<AsyncIterable<DatasetEventView>> {
    const ds = await this.auth.adminDataset(p, org, name);
    const initial = statusOf(await this.readCounts(ds.id));
    let watch = this.watches.get(ds.id);
    if (!watch) {
      watch = new DatasetWatch(ds.id, this.readCounts, this.opts, this.now);
      this.watches.set(ds.id, watch);
    }
    this.unsubscribe ??= this.bus.subscribe((n) => this.watches.get(n.datasetId)?.notice(n));
    const w = watch;
    const sub = new EventStream(initial, () => {
      w.subs.delete(sub);
      if (w.subs.size > 0) return;
      w.stop();
      if (this.watches.get(w.datasetId) === w) this.watches.delete(w.datasetId);
      if (this.watches.size === 0) {
        this.unsubscribe?.();
        this.unsubscribe = undefined;
      }
    });
    w.subs.add(sub);
    return sub;
  }

  /** Ends every stream (the process is stopping). */
  close(): void {
    for (const w of [...this.watches.values()]) for (const s of [...w.subs]) s.end();
  }
}

/** One dataset's subscribers on this host and the notices waiting for a counts read. */
class DatasetWatch {
  readonly subs = new Set<EventStream>();
  private waiting: ProgressNotice[] = [];
  private timer?: NodeJS.Timeout;
  private reading = false;
  private readAt = 0;
  private stopped = false;

  constructor(
    readonly datasetId: string,
    private readonly readCounts: CountsReader,
    private readonly opts: DatasetEventsOptions,
    private readonly now: () => number,
  ) {}

  notice(n: ProgressNotice): void {
    if (this.stopped || n.itemIds.length === 0) return;
    this.waiting.push(n);
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.waiting = [];
  }

  private schedule(): void {
    if (this.timer || this.reading || this.stopped || this.waiting.length === 0) return;
    const visible = Math.min(...this.waiting.map((n) => n.at)) + this.opts.visibilityLagMs;
    const due = Math.max(visible, this.readAt + (this.opts.readEveryMs ?? READ_EVERY_MS));
    this.timer = setTimeout(() => void this.read(), Math.max(0, due - this.now()));
    this.timer.unref();
  }

  private async read(): Promise<void> {
    this.timer = undefined;
    this.reading = true;
    const start = this.now();
    this.readAt = start;
    // Only notices the engine shows by now; later ones wait for the next read.
    const ready = this.waiting.filter((n) => n.at + this.opts.visibilityLagMs <= start);
    this.waiting = this.waiting.filter((n) => n.at + this.opts.visibilityLagMs > start);
    try {
      if (ready.length === 0) return;
      const counts = await this.readCounts(this.datasetId);
      const status = statusOf(counts);
      const events = itemEvents(ready, counts, status);
      for (const s of this.subs) s.deliver(events, counts, status);
    } catch (err) {
      // The next notice reads again, and its counts cover these items too.
      this.opts.log.warn({ err }, 'could not read counts for dataset events');
    } finally {
      this.reading = false;
      this.schedule();
    }
  }
}

/** The notices of one read as events: one per type, in chunks of MAX_IDS ids. */
function itemEvents(
  notices: ProgressNotice[],
  counts: DatasetCounts,
  status: DatasetStatus,
): DatasetEventView[] {
  const out: DatasetEventView[] = [];
  for (const type of ['items.processed', 'items.failed'] as const) {
    const ids = notices.filter((n) => n.type === type).flatMap((n) => n.itemIds);
    for (let i = 0; i < ids.length; i += MAX_IDS)
      out.push({ type, itemIds: ids.slice(i, i + MAX_IDS), counts, status });
  }
  return out;
}

/** One subscriber's events, bounded: a slow reader gets merged events, never unbounded memory. */
class EventStream implements AsyncIterableIterator<DatasetEventView> {
  private readonly queue: DatasetEventView[] = [];
  private reader?: (r: IteratorResult<DatasetEventView>) => void;
  private done = false;

  constructor(
    private lastStatus: DatasetStatus,
    private readonly onEnd: () => void,
  ) {}

  deliver(events: DatasetEventView[], counts: DatasetCounts, status: DatasetStatus): void {
    for (const e of events) this.push(e);
    if (this.lastStatus === 'pending' && status === 'published')
      this.push({ type: 'dataset.published', itemIds: [], counts, status });
    this.lastStatus = status;
  }

  private push(e: DatasetEventView): void {
    if (this.done) return;
    if (this.reader) {
      const r = this.reader;
      this.reader = undefined;
      r({ value: e, done: false });
      return;
    }
    if (this.queue.length >= MAX_QUEUED && e.type !== 'dataset.published') {
      // Into the newest waiting event of its type with room, carrying the newest counts…
      const into = this.queue.findLast(
        (q) => q.type === e.type && q.itemIds.length + e.itemIds.length <= MAX_IDS,
      );
      if (into) {
        into.itemIds = [...into.itemIds, ...e.itemIds];
        into.counts = e.counts;
        into.status = e.status;
        return;
      }
      // …or, with none, the oldest item event goes: its counts are superseded anyway.
      const oldest = this.queue.findIndex((q) => q.type !== 'dataset.published');
      if (oldest >= 0) this.queue.splice(oldest, 1);
    }
    this.queue.push(e);
  }

  next(): Promise<IteratorResult<DatasetEventView>> {
    const e = this.queue.shift();
    if (e) return Promise.resolve({ value: e, done: false });
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.reader = resolve;
    });
  }

  return(): Promise<IteratorResult<DatasetEventView>> {
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.queue.length = 0;
    const r = this.reader;
    this.reader = undefined;
    r?.({ value: undefined, done: true });
    this.onEnd();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<DatasetEventView> {
    return this;
  }
}
