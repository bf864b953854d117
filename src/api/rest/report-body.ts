import type { Report } from '../../domain/report';

const iso = (ms: number): string => new Date(ms).toISOString();

/** The analytics report as REST writes it (snake_case, ISO 8601 times). */
export function reportBody(r: Report): Record<string, unknown> {
  return {
    from: iso(r.spec.from),
    to: iso(r.spec.to),
    interval: r.spec.interval,
    intervals: r.intervals.map((i) => ({
      from: iso(i.start),
      to: iso(i.end),
      requests: i.requests,
      events: i.events,
      searches: i.searches,
      zero_result_searches: i.zeroResultSearches,
    })),
    searches: {
      count: r.searches.count,
      zero_results: r.searches.zeroResults,
      zero_result_share: r.searches.zeroResultShare,
    },
    top_filters: r.topFilters.map((x) => ({ filter: x.value, count: x.count })),
    top_sort_fields: r.topSortFields.map((x) => ({ field: x.value, count: x.count })),
    top_clicked_ids: r.topClickedIds.map((x) => ({ id: x.value, count: x.count })),
    click_through: r.clickThrough,
  };
}
