/**
 * The analytics report (contract §11) on every EventLog adapter, against a brute-force model
 * of the same definitions over random logs: both engines must give the model's report exactly
 * (orders and ties included).
 */
import fc from 'fast-check';
import { calendarKey, calendarNext, type CalendarInterval } from '../../src/domain/figures';
import {
  CLICK_THROUGH_TYPES,
  clickThrough,
  eventKeys,
  searchTotals,
  type Report,
  type Ranked,
  type ReportSpec,
} from '../../src/domain/report';
import type { LoggedEvent } from '../../src/ports/event-log';
import { waitFor } from '../helpers/app';
import { ENGINES, twoHosts, type Host } from './engines';

const DAY = 86_400_000;
const T0 = Date.parse('2026-08-30T00:00:00Z');
/** Values whose bytewise (UTF-8) order differs from JavaScript's UTF-16 order. */
const VALUES = ['a', 'b', 'Z', 'é', '\uFF21', '\u{1F600}'];
const REQUEST_TYPES = ['search', 'similar', 'explore', 'collection', 'lens'];
const ACTIONS = ['click', 'view', 'add_to_cart'];

const bytewise = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

function top(counts: Map<string, number>, n: number): Ranked[] {
  return [...counts]
    .map(([value, count]) => ({ value, count }))
    .sort((x, y) => y.count - x.count || bytewise(x.value, y.value))
    .slice(0, n);
}

function bump(m: Map<string, number>, k: string, by = 1): void {
  m.set(k, (m.get(k) ?? 0) + by);
}

/** The report as contract §11 and domain/report define it, by brute force. */
function model(events: LoggedEvent[], spec: ReportSpec): Report {
  const inRange = events.filter((e) => e.at >= spec.from && e.at < spec.to);
  const intervals: Report['intervals'] = [];
  for (let s = spec.from; s < spec.to; s = calendarNext(s, spec.interval)) {
    const here = inRange.filter((e) => calendarKey(e.at, spec.interval) === s);
    const requests: Record<string, number> = {};
    const actions: Record<string, number> = {};
    for (const e of here) {
      const into = e.kind === 'request' ? requests : actions;
      into[e.type] = (into[e.type] ?? 0) + 1;
    }
    const searches = here.filter((e) => e.kind === 'request' && e.type === 'search');
    intervals.push({
      start: s,
      end: Math.min(calendarNext(s, spec.interval), spec.to),
      requests,
      events: actions,
      searches: searches.length,
      zeroResultSearches: searches.filter((e) => e.facts?.total === 0).length,
    });
  }
  const requests = inRange.filter((e) => e.kind === 'request');
  const clicks = inRange.filter((e) => e.kind === 'track' && e.type === 'click');
  const filters = new Map<string, number>();
  const sorts = new Map<string, number>();
  const clicked = new Map<string, number>();
  for (const r of requests) {
    for (const f of r.facts?.filters ?? []) bump(filters, f);
    if (r.facts?.sort !== undefined) bump(sorts, r.facts.sort);
  }
  for (const c of clicks) {
    const id = eventKeys(c).itemId;
    if (id) bump(clicked, id);
  }
  const clickThroughs = Object.fromEntries(
    CLICK_THROUGH_TYPES.map((t) => {
      const shown = requests.filter((r) => r.type === t && eventKeys(r).pageViewId).length;
      const through = clicks.filter((c) => {
        const k = eventKeys(c);
        return (
          k.pageViewId &&
          k.itemId &&
          events.some(
            (r) =>
              r.kind === 'request' &&
              r.type === t &&
              eventKeys(r).pageViewId === k.pageViewId &&
              r.facts?.shown?.includes(k.itemId!),
          )
        );
      }).length;
      return [t, clickThrough(shown, through)];
    }),
  ) as Report['clickThrough'];
  return {
    spec,
    intervals,
    searches: searchTotals(
      intervals.map((i) => ({ searches: i.searches, zero: i.zeroResultSearches })),
    ),
    topFilters: top(filters, spec.top),
    topSortFields: top(sorts, spec.top),
    topClickedIds: top(clicked, spec.top),
    clickThrough: clickThroughs,
  };
}

const value = fc.constantFrom(...VALUES);
const pageView = fc.option(fc.constantFrom('pv1', 'pv2', 'pv3', 'pv4'), { nil: undefined });
/** Spread over 40 days around the range, so some events fall outside it. */
const time = fc.integer({ min: T0 - 5 * DAY, max: T0 + 35 * DAY });

const requestEvent = fc.record({
  type: fc.constantFrom(...REQUEST_TYPES),
  at: time,
  pv: pageView,
  total: fc.integer({ min: 0, max: 3 }),
  filters: fc.uniqueArray(
    fc.oneof(
      value,
      value.map((v) => `colour:${v}`),
    ),
    { maxLength: 3 },
  ),
  sort: fc.option(value, { nil: undefined }),
  shown: fc.uniqueArray(value, { maxLength: 4 }),
});
const trackEvent = fc.record({
  action: fc.constantFrom(...ACTIONS),
  at: time,
  pv: pageView,
  id: fc.option(value, { nil: undefined }),
});

function toEvents(
  datasetId: string,
  reqs: Array<typeof requestEvent extends fc.Arbitrary<infer R> ? R : never>,
  tracks: Array<typeof trackEvent extends fc.Arbitrary<infer T> ? T : never>,
): LoggedEvent[] {
  return [
    ...reqs.map((r): LoggedEvent => ({
      org: 'o',
      datasetId,
      kind: 'request',
      type: r.type,
      at: r.at,
      ...(r.pv ? { vars: { page_view_id: r.pv } } : {}),
      facts: {
        total: r.type === 'search' ? r.total : r.shown.length,
        filters: r.filters,
        ...(r.type === 'search' && r.sort !== undefined ? { sort: r.sort } : {}),
        ...(r.type !== 'search' && r.shown.length ? { shown: r.shown } : {}),
      },
    })),
    ...tracks.map((t): LoggedEvent => ({
      org: 'o',
      datasetId,
      kind: 'track',
      type: t.action,
      at: t.at,
      vars: {
        a: t.action,
        ...(t.pv ? { page_view_id: t.pv } : {}),
        ...(t.id !== undefined ? { id: t.id } : {}),
      },
    })),
  ];
}

describe.each(ENGINES)('the analytics report on %s', (_name, open) => {
  const hosts = twoHosts(open);
  let a: Host;
  let b: Host;
  beforeEach(() => ({ a, b } = hosts));

  test('equals the brute-force model of contract §11 on random logs', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(requestEvent, { minLength: 1, maxLength: 120 }),
        fc.array(trackEvent, { maxLength: 120 }),
        fc.constantFrom<CalendarInterval>('hour', 'day', 'week', 'month'),
        fc.integer({ min: 1, max: 8 }),
        async (reqs, tracks, interval, n) => {
          const ds = `d${run++}`;
          const events = toEvents(ds, reqs, tracks);
          // two hosts write halves of the log, as API hosts do
          await a.events.append(events.filter((_, i) => i % 2 === 0));
          await b.events.append(events.filter((_, i) => i % 2 === 1));
          await waitFor('the log visible', async () => {
            const all = await a.events.list(ds, { from: 0, to: T0 + 100 * DAY }, 10_000);
            return all.length === events.length;
          });
          const to = interval === 'hour' ? T0 + 2 * DAY : T0 + 30 * DAY;
          const spec: ReportSpec = { from: calendarKey(T0, interval), to, interval, top: n };
          expect(await b.events.report(ds, spec)).toEqual(model(events, spec));
        },
      ),
      { numRuns: 6 },
    );
  }, 120_000);

  test('keeps what requests found, filtered, sorted and showed', async () => {
    const e: LoggedEvent = {
      org: 'o',
      datasetId: 'd',
      kind: 'request',
      type: 'similar',
      at: T0,
      vars: { page_view_id: 'p' },
      facts: { total: 2, filters: ['colour', 'colour:red'], shown: ['x', 'y'] },
    };
    await a.events.append([e]);
    const [back] = await waitFor('visible', async () => {
      const l = await b.events.list('d', { from: T0, to: T0 + 1 }, 10);
      return l.length === 1 && l;
    });
    expect(back).toEqual(e);
  });

  test('an empty log gives every interval, zero counts and null rates', async () => {
    const spec: ReportSpec = { from: T0, to: T0 + 3 * DAY, interval: 'day', top: 10 };
    const r = await a.events.report('nothing', spec);
    expect(r).toEqual(model([], spec));
    expect(r.intervals).toHaveLength(3);
    expect(r.searches.zeroResultShare).toBeNull();
    expect(r.clickThrough.similar).toEqual({ shown: 0, clicks: 0, rate: null });
  });
});
