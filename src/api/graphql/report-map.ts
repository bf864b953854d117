import type { Report } from '../../domain/report';
import { CalendarInterval, RequestType } from './types/enums';
import type { AnalyticsReport, NamedCount } from './types/report';

const iso = (ms: number): string => new Date(ms).toISOString();
const named = (m: Record<string, number>): NamedCount[] =>
  Object.entries(m).map(([name, count]) => ({ name, count }));

/** The report view as GraphQL types (the REST body is api/rest/report-body). */
export function toAnalyticsReport(r: Report): AnalyticsReport {
  return {
    from: iso(r.spec.from),
    to: iso(r.spec.to),
    interval: r.spec.interval as CalendarInterval,
    intervals: r.intervals.map((i) => ({
      from: iso(i.start),
      to: iso(i.end),
      requests: named(i.requests),
      events: named(i.events),
      searches: i.searches,
      zeroResultSearches: i.zeroResultSearches,
    })),
    searches: r.searches.count,
    zeroResultSearches: r.searches.zeroResults,
    zeroResultShare: r.searches.zeroResultShare,
    topFilters: r.topFilters,
    topSortFields: r.topSortFields,
    topClickedIds: r.topClickedIds,
    clickThrough: Object.entries(r.clickThrough).map(([type, f]) => ({
      type: type as RequestType,
      ...f,
    })),
  };
}
