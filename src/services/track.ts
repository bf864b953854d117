import { parseActionVars } from '../domain/action-vars';
import { invalid, type ErrorDetail } from '../domain/errors';
import { LIMITS } from '../domain/limits';
import type { EventLog, LoggedEvent } from '../ports/event-log';
import type { AuthService } from './auth';
import type { RequestContext } from './principal';

/**
 * Behaviour events (contract §11): stored with the `v` of Vision API requests in the dataset's
 * event log, never billed. `a:<action>` names the action of every event.
 */
export class TrackService {
  constructor(
    private readonly auth: AuthService,
    private readonly events: EventLog,
    private readonly now: () => number,
  ) {}

  async track(
    ctx: RequestContext,
    org: string,
    name: string,
    v: string | undefined,
    body: unknown,
  ): Promise<{ accepted: number }> {
    const ds = await this.auth.visionDataset(ctx.principal, org, name);
    const given = batchOf(body);
    if (v === undefined && !given.length)
      throw invalid('v is required: a:<action> and any other key:value pairs', [
        { param: 'v', message: 'required, e.g. a:click,id:sku-1' },
      ]);
    const now = this.now();
    const out: LoggedEvent[] = [];
    const details: ErrorDetail[] = [];
    const add = (raw: unknown, at: unknown, where: { param?: string; index?: number }) => {
      try {
        if (typeof raw !== 'string') throw invalid('v must be a string of key:value pairs');
        const vars = parseActionVars(raw);
        const action = vars.a;
        if (!action) throw invalid('a:<action> is required, e.g. a:click');
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
    given.forEach((e, index) => {
      const ev = (typeof e === 'object' && e !== null ? e : {}) as {
        v?: unknown;
        timestamp?: unknown;
      };
      add(ev.v, ev.timestamp, { index });
    });
    if (details.length)
      throw invalid(`${details.length} events cannot be recorded; none was`, details);
    await this.events.append(out);
    return { accepted: out.length };
  }
}

function batchOf(body: unknown): unknown[] {
  if (body === undefined || body === null || body === '') return [];
  const events = typeof body === 'object' ? (body as { events?: unknown }).events : undefined;
  if (!Array.isArray(events))
    throw invalid('body must be { "events": [ { "v": "a:click,…", "timestamp": "…" } ] }', [
      { field: 'events', message: 'an array of events' },
    ]);
  if (events.length > LIMITS.trackMaxEvents)
    throw invalid(`at most ${LIMITS.trackMaxEvents} events per request; got ${events.length}`, [
      { field: 'events', message: `at most ${LIMITS.trackMaxEvents}` },
    ]);
  return events;
}

/** An ISO 8601 time or epoch milliseconds; absent means now. Not in the future. */
function timeOf(t: unknown, now: number): number {
  if (t === undefined || t === null) return now;
  const ms = Math.floor(
    typeof t === 'number'
      ? t
      : typeof t === 'string'
        ? /^\d{5,}$/.test(t)
          ? Number(t)
          : Date.parse(t)
        : NaN,
  );
  if (!Number.isFinite(ms) || ms < 0)
    throw invalid('timestamp must be ISO 8601 or epoch milliseconds');
  if (ms > now + 60_000) throw invalid('timestamp is in the future');
  return ms;
}
