import type { Condition } from '../query/ast';
import {
  CALENDAR_INTERVALS,
  calendarKey,
  calendarNext as nextInterval,
  type CalendarInterval,
} from './figures';
import { invalid } from './errors';
import { LIMITS } from './limits';

/** The request types whose shown results a click can follow (contract §11 click-through). */
export const CLICK_THROUGH_TYPES = ['similar', 'explore', 'collection'] as const;
export type ClickThroughType = (typeof CLICK_THROUGH_TYPES)[number];

/** The tracked action that counts as a click (`a:click`). */
export const CLICK_ACTION = 'click';

/** What the report needs to know about a billed request, beyond its type and `v`. */
export interface RequestFacts {
  /** Items the request found: all matches for search, the entries returned otherwise. */
  total: number;
  /** The `key` and `key:value` terms of its filters (q and typed filters), each once. */
  filters: string[];
  /** The sort field a client asked for (search only; the default sort is not counted). */
  sort?: string;
  /** The ids of the results shown, for click-through (similarity requests). */
  shown?: string[];
}

/** Longest filter term the log keeps (longer ones are cut): a report lists terms, not values. */
const TERM_MAX = 256;

/** `key` for every condition, `key:value` (or `key:!value`) for every value it names. */
export function filterTerms(conditions: Condition[]): string[] {
  const terms = new Set<string>();
  const out = {
    add: (t: string) => terms.add(t.length > TERM_MAX ? `${t.slice(0, TERM_MAX)}…` : t),
  };
  const walk = (cs: Condition[]): void => {
    for (const c of cs) {
      switch (c.kind) {
        case 'match':
        case 'exclude':
          out.add(c.field);
          for (const v of c.values) out.add(`${c.field}:${c.kind === 'exclude' ? '!' : ''}${v}`);
          break;
        case 'range':
        case 'timeRange':
        case 'exists':
          out.add(c.field);
          break;
        case 'text':
          out.add('text');
          break;
        case 'any':
          c.of.forEach(walk);
          break;
        case 'none':
          walk(c.of);
          break;
        case 'ids':
          break;
      }
    }
  };
  walk(conditions);
  return [...terms];
}

export interface ReportSpec {
  /** Epoch ms, inclusive; the start of the first interval. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
  interval: CalendarInterval;
  /** How many entries each "most used" list holds. */
  top: number;
}

export interface ReportParams {
  from?: string;
  to?: string;
  interval?: string;
  top?: number;
}

const DAY = 86_400_000;

/** 9999-12-31T23:59:59.999Z: the last instant an ISO 8601 year of four digits can name. */
const LAST_MS = 253_402_300_799_999;

function timeParam(name: 'from' | 'to', raw: string | undefined, dflt: number): number {
  if (raw === undefined || raw === '') return dflt;
  // five digits or more are epoch ms; four are a year (ISO 8601), as Date.parse reads them
  const ms = /^\d{5,}$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isFinite(ms) || ms < 0 || ms > LAST_MS)
    throw invalid(`${name}: expected an ISO 8601 time or epoch milliseconds; got '${raw}'`, [
      { param: name, message: 'ISO 8601 (e.g. 2026-11-01 or 2026-11-01T00:00:00Z) or epoch ms' },
    ]);
  return ms;
}

/**
 * `from` (default: 30 days before `to`) is rounded down to the start of its interval, so the
 * first row is a whole interval; `to` (default: now) is exclusive.
 */
export function parseReportParams(p: ReportParams, now: number): ReportSpec {
  const interval = (p.interval === undefined || p.interval === '' ? 'day' : p.interval) as
    CalendarInterval | string;
  if (!(CALENDAR_INTERVALS as readonly string[]).includes(interval))
    throw invalid(`interval: expected one of ${CALENDAR_INTERVALS.join(', ')}; got '${interval}'`, [
      { param: 'interval', message: CALENDAR_INTERVALS.join(' | ') },
    ]);
  const unit = interval as CalendarInterval;
  const to = timeParam('to', p.to, now);
  const from = calendarKey(timeParam('from', p.from, to - 30 * DAY), unit);
  if (from >= to)
    throw invalid('from must be before to', [{ param: 'from', message: 'must be before to' }]);
  const top = p.top ?? LIMITS.reportTopDefault;
  if (!Number.isInteger(top) || top < 1 || top > LIMITS.reportTopMax)
    throw invalid(`top: an integer from 1 to ${LIMITS.reportTopMax}`, [
      { param: 'top', message: `1 to ${LIMITS.reportTopMax}` },
    ]);
  let n = 0;
  for (let s = from; s < to; s = nextInterval(s, unit))
    if (++n > LIMITS.histogramMaxBuckets)
      throw invalid(
        `from–to spans more than ${LIMITS.histogramMaxBuckets} ${unit}s; use a larger interval or a shorter range`,
        [{ param: 'interval', message: `at most ${LIMITS.histogramMaxBuckets} intervals` }],
      );
  return { from, to, interval: unit, top };
}

/** One interval of the report. */
export interface ReportInterval {
  start: number;
  end: number;
  /** Billed requests per request type. */
  requests: Record<string, number>;
  /** Tracked events per action. */
  events: Record<string, number>;
  searches: number;
  zeroResultSearches: number;
}

export interface Ranked {
  value: string;
  count: number;
}

export interface ClickThrough {
  /** Requests of the type in the range that carried a `page_view_id`: results that were shown. */
  shown: number;
  /** Clicks in the range on an id those results showed on the same `page_view_id`. */
  clicks: number;
  /** clicks ÷ shown; null when nothing was shown. */
  rate: number | null;
}

/** The analytics report of a dataset (contract §11), computed by the event log's engine. */
export interface Report {
  spec: ReportSpec;
  intervals: ReportInterval[];
  searches: { count: number; zeroResults: number; zeroResultShare: number | null };
  /** Most used filter terms (`key`, `key:value`), by number of requests using them. */
  topFilters: Ranked[];
  topSortFields: Ranked[];
  topClickedIds: Ranked[];
  clickThrough: Record<ClickThroughType, ClickThrough>;
}

/** The report's rows from per-interval counts keyed by interval start. */
export function reportIntervals(
  spec: ReportSpec,
  rows: Array<{ start: number; kind: 'request' | 'track'; type: string; count: number }>,
  searches: Array<{ start: number; searches: number; zero: number }>,
): ReportInterval[] {
  const out: ReportInterval[] = [];
  const at = new Map<number, ReportInterval>();
  for (let s = spec.from; s < spec.to; s = nextInterval(s, spec.interval)) {
    const row: ReportInterval = {
      start: s,
      end: Math.min(nextInterval(s, spec.interval), spec.to),
      requests: {},
      events: {},
      searches: 0,
      zeroResultSearches: 0,
    };
    out.push(row);
    at.set(s, row);
  }
  for (const r of rows) {
    const row = at.get(r.start);
    if (row) (r.kind === 'request' ? row.requests : row.events)[r.type] = r.count;
  }
  for (const s of searches) {
    const row = at.get(s.start);
    if (row) Object.assign(row, { searches: s.searches, zeroResultSearches: s.zero });
  }
  return out;
}

/** a ÷ b to six decimals; null when b is 0. */
const ratio = (a: number, b: number): number | null => (b ? Math.round((a / b) * 1e6) / 1e6 : null);

export function clickThrough(shown: number, clicks: number): ClickThrough {
  return { shown, clicks, rate: ratio(clicks, shown) };
}

/** The report's search totals from its per-interval search counts. */
export function searchTotals(
  perInterval: Array<{ searches: number; zero: number }>,
): Report['searches'] {
  const count = perInterval.reduce((n, s) => n + s.searches, 0);
  const zeroResults = perInterval.reduce((n, s) => n + s.zero, 0);
  return { count, zeroResults, zeroResultShare: ratio(zeroResults, count) };
}

/** The keys the report joins on, from an event's `v`: its page view, and a tracked item id. */
export function eventKeys(e: { kind: 'request' | 'track'; vars?: Record<string, string> }): {
  pageViewId?: string;
  itemId?: string;
} {
  const pageViewId = e.vars?.page_view_id;
  const itemId = e.kind === 'track' ? e.vars?.id : undefined;
  return {
    ...(pageViewId ? { pageViewId } : {}),
    ...(itemId ? { itemId } : {}),
  };
}
