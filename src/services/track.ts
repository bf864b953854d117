import type { Dataset } from '../domain/dataset';
import { invalid, type ErrorDetail } from '../domain/errors';
import { LIMITS } from '../domain/limits';
import { PURCHASE_ACTION, parseQty } from '../domain/popularity';
import type { EventLog, LoggedEvent } from '../ports/event-log';
import type { Principal } from './principal';
import type { VisionService } from './vision';

/** One event as a client sends it: `v` names the action with `a:`; no timestamp means now. */
interface TrackEvent {
  v: string;
  /** ISO 8601 or epoch milliseconds. */
  timestamp?: string | number | null;
}

/** Events to record: one given as the request's own `v`, and/or a batch. */
export interface TrackEvents {
  v?: string;
  events: readonly TrackEvent[];
}

/**
 * Behaviour events (contract §11): stored with the `v` of Vision API requests in the dataset's
 * event log, never billed. `a:<action>` names the action of every event.
 */
export class TrackService {
  constructor(
    private readonly vision: Pick<VisionService, 'read'>,
    private readonly events: EventLog,
    private readonly now: () => number,
  ) {}

  /**
   * Within a scoped token's scope like every Vision request: its uid is each event's user_id
   * unless the event names one. Events about items outside the scope are recorded as any other
   * (refusing them would tell which items the scope holds).
   */
  track(p: Principal, org: string, name: string, cmd: TrackEvents): Promise<{ accepted: number }> {
    return this.vision.read(p, org, name, 'track', (scope) =>
      this.record(scope.ds, cmd, (v) => scope.vars(v)),
    );
  }

  private async record(
    ds: Dataset,
    cmd: TrackEvents,
    parse: (v: string) => Record<string, string>,
  ): Promise<{ accepted: number }> {
    const { v, events: given } = cmd;
    if (given.length > LIMITS.trackMaxEvents)
      throw invalid(`at most ${LIMITS.trackMaxEvents} events per request; got ${given.length}`, [
        { field: 'events', message: `at most ${LIMITS.trackMaxEvents}` },
      ]);
    if (v === undefined && !given.length)
      throw invalid('v is required: a:<action> and any other key:value pairs', [
        { param: 'v', message: 'required, e.g. a:click,id:sku-1' },
      ]);
    const now = this.now();
    const out: LoggedEvent[] = [];
    const details: ErrorDetail[] = [];
    const add = (
      raw: string,
      at: TrackEvent['timestamp'],
      where: { param?: string; index?: number },
    ) => {
      try {
        const vars = parse(raw);
        const action = vars.a;
        if (!action) throw invalid('a:<action> is required, e.g. a:click');
        // a purchase counts its qty toward service_purchases (contract §14): refuse what cannot
        if (action === PURCHASE_ACTION) parseQty(vars.qty);
        out.push({
          org: ds.org,
          datasetId: ds.id,
          kind: 'track',
          type: action,
          at: timeOf(at, now),
          vars,
        });
      } catch (e) {
        const detail = (e as { details?: ErrorDetail[] }).details?.[0];
        details.push({ ...where, ...detail, message: detail?.message ?? (e as Error).message });
      }
    };
    if (v !== undefined) add(v, undefined, { param: 'v' });
    given.forEach((e, index) => add(e.v, e.timestamp, { index }));
    if (details.length)
      throw invalid(`${details.length} events cannot be recorded; none was`, details);
    await this.events.append(out);
    return { accepted: out.length };
  }
}

/**
 * An ISO 8601 time or epoch milliseconds; absent means now. At most trackFutureMs ahead, which
 * allows for a client's clock skew but not for events that would count before they happen.
 */
function timeOf(t: string | number | null | undefined, now: number): number {
  if (t === undefined || t === null) return now;
  const ms = Math.floor(typeof t === 'number' ? t : /^\d{5,}$/.test(t) ? Number(t) : Date.parse(t));
  if (!Number.isFinite(ms) || ms < 0)
    throw invalid(`timestamp must be ISO 8601 or epoch milliseconds; got '${String(t)}'`, [
      { field: 'timestamp', value: String(t), message: 'ISO 8601, e.g. 2026-11-01T12:00:00Z' },
    ]);
  if (ms > now + LIMITS.trackFutureMs)
    throw invalid(
      `timestamp ${new Date(ms).toISOString()} is more than ${LIMITS.trackFutureMs / 60_000} minutes in the future`,
      [{ field: 'timestamp', value: String(t), message: 'in the future' }],
    );
  return ms;
}
