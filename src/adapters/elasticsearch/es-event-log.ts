import { eventKeys, type Report, type ReportSpec } from '../../domain/report';
import { countedEvent } from '../../domain/popularity';
import type { EventLog, LoggedEvent } from '../../ports/event-log';
import { esReport } from './report';
import { unavailable } from './outage';
import type { EsIndices } from './indices';

interface EventDoc {
  org: string;
  dataset_id: string;
  kind: LoggedEvent['kind'];
  type: string;
  at: number;
  vars?: Record<string, string>;
  total?: number;
  filters?: string[];
  sort?: string;
  shown?: string[];
  page_view_id?: string;
  item_id?: string;
  qty?: number;
  received_at?: number;
}

function eventDoc(e: LoggedEvent, receivedAt: number): EventDoc {
  const keys = eventKeys(e);
  const f = e.facts;
  const counted = countedEvent(e);
  return {
    org: e.org,
    dataset_id: e.datasetId,
    kind: e.kind,
    type: e.type,
    at: e.at,
    ...(e.vars && Object.keys(e.vars).length ? { vars: e.vars } : {}),
    ...(f
      ? {
          total: f.total,
          ...(f.filters.length ? { filters: f.filters } : {}),
          ...(f.sort !== undefined ? { sort: f.sort } : {}),
          ...(f.shown?.length ? { shown: f.shown } : {}),
        }
      : {}),
    ...(keys.pageViewId ? { page_view_id: keys.pageViewId } : {}),
    ...(keys.itemId ? { item_id: keys.itemId } : {}),
    ...(counted ? { qty: counted.qty } : {}),
    received_at: receivedAt,
  };
}

/** At most this many events go in one bulk request. */
const MAX_BATCH = 1000;
/** How long an append waits for others to share its bulk request. */
const LINGER_MS = 500;

/**
 * The event log in one Elasticsearch index for the installation. Appends within LINGER_MS of
 * each other share one bulk request (one in flight at a time; what arrives meanwhile goes in
 * the next), so logging costs a small fraction of a round trip per request. Callers that must
 * not wait (request logging) do not await the append; shutdown waits for what is pending.
 */
export class EsEventLog implements EventLog {
  private queue: Array<{ events: LoggedEvent[]; done: (e?: unknown) => void }> = [];
  private flushing = false;

  constructor(
    private readonly indices: EsIndices,
    /** Stamps each event's received_at, which the popularity roll-up reads as "new". */
    private readonly now: () => number = Date.now,
  ) {}

  append(events: LoggedEvent[]): Promise<void> {
    if (!events.length) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.queue.push({ events, done: (e) => (e === undefined ? resolve() : reject(e)) });
      if (this.flushing) return;
      this.flushing = true;
      setTimeout(() => void this.flush(), LINGER_MS);
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch: typeof this.queue = [];
        let n = 0;
        while (this.queue.length && (n === 0 || n + this.queue[0].events.length <= MAX_BATCH)) {
          const next = this.queue.shift()!;
          batch.push(next);
          n += next.events.length;
        }
        try {
          await this.write(batch.flatMap((b) => b.events));
          batch.forEach((b) => b.done());
        } catch (e) {
          batch.forEach((b) => b.done(e));
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  private async write(events: LoggedEvent[]): Promise<void> {
    const index = this.indices.shared('events');
    const receivedAt = this.now();
    const r = await this.indices.client.bulk({
      operations: events.flatMap((e) => [{ index: { _index: index } }, eventDoc(e, receivedAt)]),
    });
    if (r.errors) {
      const first = r.items.find((i) => i.index?.error)?.index?.error;
      throw unavailable(`the event log refused events: ${first?.reason ?? first?.type}`);
    }
  }

  async list(
    datasetId: string,
    range: { from: number; to: number },
    limit: number,
  ): Promise<LoggedEvent[]> {
    const r = await this.indices.client.search<EventDoc>({
      index: this.indices.shared('events'),
      query: {
        bool: {
          filter: [
            { term: { dataset_id: datasetId } },
            { range: { at: { gte: range.from, lt: range.to } } },
          ],
        },
      },
      sort: [{ at: 'asc' }, { _doc: 'asc' }] as never,
      size: limit,
    });
    return r.hits.hits.map((h) => {
      const d = h._source!;
      return {
        org: d.org,
        datasetId: d.dataset_id,
        kind: d.kind,
        type: d.type,
        at: d.at,
        ...(d.vars ? { vars: d.vars } : {}),
        ...(d.total !== undefined
          ? {
              facts: {
                total: d.total,
                filters: d.filters ?? [],
                ...(d.sort !== undefined ? { sort: d.sort } : {}),
                ...(d.shown ? { shown: d.shown } : {}),
              },
            }
          : {}),
      };
    });
  }

  async report(datasetId: string, spec: ReportSpec): Promise<Report> {
    return esReport(this.indices, datasetId, spec);
  }
}
