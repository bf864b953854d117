/**
 * Figures on search results (contract §10): what a request asks for, what engines answer,
 * and the engine-independent parts (the request's rules, facet ordering, histogram buckets), so
 * both engines give the same figures by construction.
 */
import { invalid } from './errors';
import { LIMITS, isServiceTimeField, type ServiceTimeField } from './limits';

export type CalendarInterval = 'hour' | 'day' | 'week' | 'month';
export const CALENDAR_INTERVALS: readonly CalendarInterval[] = ['hour', 'day', 'week', 'month'];

export type HistogramSpec =
  { field: string; interval: number } | { field: ServiceTimeField; calendar: CalendarInterval };

export interface FiguresSpec {
  facets: Array<{ field: string; disjunctive: boolean }>;
  facetSize: number;
  stats: string[];
  histograms: HistogramSpec[];
  /**
   * Facets count groups of this field instead of items (contract §13): a value counts the
   * matching groups with at least one matching item holding it.
   */
  groupBy?: string;
  /** With groupBy: counts are exact up to this many matching groups. */
  exactUpTo?: number;
}

interface FacetBucket {
  value: string;
  count: number;
}
export interface FacetFigure {
  buckets: FacetBucket[];
  other: number;
  missing: number;
  /** False when the engine estimated the group counts (more matching groups than it counts exactly). */
  exact?: false;
}
export interface StatsFigure {
  count: number;
  min: number | null;
  max: number | null;
  avg: number | null;
  sum: number;
}
/** `from`/`to` are numbers, or epoch milliseconds for the service time fields. */
export interface HistogramBucket {
  from: number;
  to: number;
  count: number;
}
export interface Figures {
  facets?: Record<string, FacetFigure>;
  stats?: Record<string, StatsFigure>;
  histograms?: Record<string, HistogramBucket[]>;
}

export const hasFigures = (s: FiguresSpec): boolean =>
  s.facets.length + s.stats.length + s.histograms.length > 0;

/** A 400 naming the REST parameter of the rule (GraphQL errors name the same rule). */
export const badFigure = (param: string, message: string) =>
  invalid(`${param}: ${message}`, [{ param, message }]);
const bad = badFigure;

/**
 * The rules every figures request follows, however it was written (REST parameters or typed
 * GraphQL input); errors name the REST parameter, as GraphQL's do for the same rule.
 */
export function checkFigures(spec: FiguresSpec): FiguresSpec {
  if (
    !Number.isInteger(spec.facetSize) ||
    spec.facetSize < 1 ||
    spec.facetSize > LIMITS.facetSizeMax
  )
    throw bad('facet_size', `must be an integer from 1 to ${LIMITS.facetSizeMax}`);
  const once = (param: string, fields: string[]) => {
    const seen = new Set<string>();
    for (const f of fields) {
      if (seen.has(f)) throw bad(param, `'${f}' named twice`);
      seen.add(f);
    }
  };
  once(
    'facets',
    spec.facets.map((f) => f.field),
  );
  once('stats', spec.stats);
  once(
    'histogram',
    spec.histograms.map((h) => h.field),
  );
  for (const { field } of spec.facets)
    if (isServiceTimeField(field))
      throw bad('facets', `'${field}' is a time; count it with histogram=${field}:day`);
  for (const f of spec.stats)
    if (isServiceTimeField(f))
      throw bad('stats', `'${f}' is a time; count it with histogram=${f}:day`);
  for (const h of spec.histograms) {
    if ('calendar' in h) {
      if (!isServiceTimeField(h.field))
        throw bad('histogram', `'${h.field}' is not a time field; give it a numeric interval`);
      continue;
    }
    if (isServiceTimeField(h.field))
      throw bad('histogram', `'${h.field}' takes ${CALENDAR_INTERVALS.join('|')}`);
    if (!Number.isFinite(h.interval) || h.interval <= 0)
      throw bad('histogram', `the interval of '${h.field}' must be a number > 0`);
  }
  return spec;
}

/** Code-point order (UTF-16 comparison puts some characters differently than Elasticsearch). */
function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d) return d;
  }
}

/** One distinct value of a field among matching items, as an engine counts it. */
export interface ValueCount {
  /** Numbers keep their number, for ordering; strings and booleans are their text. */
  num?: number;
  text: string;
  count: number;
}

/**
 * The facet of one field from its value counts: the `size` most frequent values, ties with
 * numbers first (ascending), then text in code-point order; `other` counts what is left out.
 * Strings and booleans with the same text are one value, as their JSON text is.
 */
export function facetFigure(values: ValueCount[], size: number, missing: number): FacetFigure {
  const merged = new Map<string, ValueCount>();
  for (const v of values) {
    const key = `${v.num !== undefined ? 'n' : 't'}:${v.text}`;
    const had = merged.get(key);
    merged.set(key, had ? { ...had, count: had.count + v.count } : { ...v });
  }
  const all = [...merged.values()].sort(
    (a, b) =>
      b.count - a.count ||
      (a.num !== undefined && b.num !== undefined
        ? a.num - b.num
        : a.num !== undefined
          ? -1
          : b.num !== undefined
            ? 1
            : compareCodePoints(a.text, b.text)),
  );
  const listed = all.slice(0, size);
  const total = all.reduce((s, v) => s + v.count, 0);
  return {
    buckets: listed.map((v) => ({ value: v.text, count: v.count })),
    other: total - listed.reduce((s, v) => s + v.count, 0),
    missing,
  };
}

/** The JSON text of a number, as facets show it (`12.5`, `3`). */
export const numberText = (n: number): string => String(n);

export function statsFigure(count: number, min: number, max: number, sum: number): StatsFigure {
  return count === 0
    ? { count: 0, min: null, max: null, avg: null, sum: 0 }
    : { count, min, max, avg: sum / count, sum };
}

/** The bucket a number falls in: aligned on multiples of the interval. */
export const numericKey = (v: number, interval: number): number =>
  Math.floor(v / interval) * interval;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** 1970-01-05 was a Monday: ISO weeks start on Monday. */
const MONDAY = 4 * DAY;

/** The UTC start of the calendar bucket holding `ms`. */
export function calendarKey(ms: number, unit: CalendarInterval): number {
  switch (unit) {
    case 'hour':
      return Math.floor(ms / HOUR) * HOUR;
    case 'day':
      return Math.floor(ms / DAY) * DAY;
    case 'week':
      return Math.floor((ms - MONDAY) / (7 * DAY)) * 7 * DAY + MONDAY;
    case 'month': {
      const d = new Date(ms);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    }
  }
}

/**
 * The width the engines first group times by for a calendar unit: hours for `hour`, days for
 * the rest (weeks and months start on a day), before calendarKey places each group.
 */
export const calendarGrain = (unit: CalendarInterval): number => (unit === 'hour' ? HOUR : DAY);

export function calendarNext(start: number, unit: CalendarInterval): number {
  if (unit === 'month') {
    const d = new Date(start);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
  return start + (unit === 'hour' ? HOUR : unit === 'day' ? DAY : 7 * DAY);
}

/** The buckets from the one holding `min` to the one holding `max`; 400 past the bucket limit. */
function bucketStarts(
  spec: HistogramSpec,
  min: number,
  max: number,
): Array<{ from: number; to: number }> {
  const out: Array<{ from: number; to: number }> = [];
  const tooMany = () =>
    bad(
      'histogram',
      `'${spec.field}' would have more than ${LIMITS.histogramMaxBuckets} buckets; use a larger interval or narrow q`,
    );
  if ('calendar' in spec) {
    const last = calendarKey(max, spec.calendar);
    for (let s = calendarKey(min, spec.calendar); s <= last; s = calendarNext(s, spec.calendar)) {
      if (out.length === LIMITS.histogramMaxBuckets) throw tooMany();
      out.push({ from: s, to: calendarNext(s, spec.calendar) });
    }
    return out;
  }
  const first = Math.floor(min / spec.interval);
  const lastIdx = Math.floor(max / spec.interval);
  if (lastIdx - first + 1 > LIMITS.histogramMaxBuckets) throw tooMany();
  for (let k = first; k <= lastIdx; k++)
    out.push({ from: k * spec.interval, to: (k + 1) * spec.interval });
  return out;
}

/** Fills the buckets from counts keyed by bucket start (numericKey / calendarKey). */
export function histogram(
  spec: HistogramSpec,
  min: number | null,
  max: number | null,
  counts: Map<number, number>,
): HistogramBucket[] {
  if (min === null || max === null) return [];
  return bucketStarts(spec, min, max).map((b) => ({ ...b, count: counts.get(b.from) ?? 0 }));
}

/** Conditions on `field` are left out of a disjunctive facet's counts (contract §10). */
export const onField = (c: { kind: string; field?: string }, field: string): boolean =>
  'field' in c && c.field === field;
