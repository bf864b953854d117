import type { CalendarInterval } from '../../domain/figures';
import {
  CLICK_ACTION,
  CLICK_THROUGH_TYPES,
  clickThrough,
  reportIntervals,
  searchTotals,
  type ClickThroughType,
  type Report,
  type Ranked,
  type ReportSpec,
} from '../../domain/report';
import { LIMITS } from '../../domain/limits';
import { FACET_SHARD_SIZE } from './dsl';
import type { EsIndices } from './indices';

type Dsl = Record<string, unknown>;

const CALENDAR: Record<CalendarInterval, string> = {
  hour: '1h',
  day: '1d',
  // Elasticsearch weeks start on Monday, as domain calendarKey's do
  week: '1w',
  month: '1M',
};

/** Most frequent first, ties by key (bytewise, as SQLite orders them). */
const ranked = (field: string, size: number): Dsl => ({
  terms: {
    field,
    size,
    // one shard (the default layout) is exact; with more, each returns this many candidates
    shard_size: Math.max(size, FACET_SHARD_SIZE),
    order: [{ _count: 'desc' }, { _key: 'asc' }],
  },
});

const term = (field: string, value: string | number): Dsl => ({ term: { [field]: value } });
/** The dataset's events of the report's range. */
const inRange = (datasetId: string, spec: ReportSpec): Dsl[] => [
  term('dataset_id', datasetId),
  { range: { at: { gte: spec.from, lt: spec.to } } },
];
const REQUEST = term('kind', 'request');
const CLICK: Dsl = { bool: { filter: [term('kind', 'track'), term('type', CLICK_ACTION)] } };

/** Every figure of the report but click-through's clicks, in one aggregation request. */
export function reportBody(datasetId: string, spec: ReportSpec): Dsl {
  return {
    size: 0,
    query: { bool: { filter: inRange(datasetId, spec) } },
    aggs: {
      intervals: {
        date_histogram: { field: 'at', calendar_interval: CALENDAR[spec.interval] },
        aggs: {
          requests: { filter: REQUEST, aggs: { types: ranked('type', 50) } },
          events: {
            filter: term('kind', 'track'),
            aggs: { types: ranked('type', LIMITS.reportMaxActions) },
          },
          searches: {
            filter: { bool: { filter: [REQUEST, term('type', 'search')] } },
            aggs: { zero: { filter: term('total', 0) } },
          },
        },
      },
      filters: { filter: REQUEST, aggs: { top: ranked('filters', spec.top) } },
      sorts: { filter: REQUEST, aggs: { top: ranked('sort', spec.top) } },
      clicked: { filter: CLICK, aggs: { top: ranked('item_id', spec.top) } },
      shown: {
        filter: {
          bool: {
            filter: [
              REQUEST,
              { terms: { type: [...CLICK_THROUGH_TYPES] } },
              { exists: { field: 'page_view_id' } },
            ],
          },
        },
        aggs: { types: ranked('type', CLICK_THROUGH_TYPES.length) },
      },
    },
  };
}

/** How many (page view, item) click pairs one round of the click-through join takes. */
const CLICK_PAIRS_PAGE = 500;

/** Clicks of the range with a page view, grouped by (page view, item), a page at a time. */
export function clickPairsBody(datasetId: string, spec: ReportSpec, after?: Dsl): Dsl {
  return {
    size: 0,
    query: {
      bool: {
        filter: [
          ...inRange(datasetId, spec),
          CLICK,
          { exists: { field: 'page_view_id' } },
          { exists: { field: 'item_id' } },
        ],
      },
    },
    aggs: {
      pairs: {
        composite: {
          size: CLICK_PAIRS_PAGE,
          sources: [
            { pv: { terms: { field: 'page_view_id' } } },
            { id: { terms: { field: 'item_id' } } },
          ],
          ...(after ? { after } : {}),
        },
      },
    },
  };
}

/**
 * For each click pair, the similarity request types that showed its item on its page view
 * (at any time: the results may have been shown before the range began).
 */
export function shownPairsBody(datasetId: string, pairs: Array<{ pv: string; id: string }>): Dsl {
  return {
    size: 0,
    query: {
      bool: {
        filter: [
          term('dataset_id', datasetId),
          REQUEST,
          { terms: { type: [...CLICK_THROUGH_TYPES] } },
          { terms: { page_view_id: [...new Set(pairs.map((p) => p.pv))] } },
        ],
      },
    },
    aggs: {
      pairs: {
        filters: {
          filters: Object.fromEntries(
            pairs.map((p, i) => [
              String(i),
              { bool: { filter: [term('page_view_id', p.pv), term('shown', p.id)] } },
            ]),
          ),
        },
        aggs: { types: { terms: { field: 'type', size: CLICK_THROUGH_TYPES.length } } },
      },
    },
  };
}

interface Bucket {
  key: string | number;
  doc_count: number;
}
interface Terms {
  buckets: Bucket[];
}

const rankedOf = (t: Terms): Ranked[] =>
  t.buckets.map((b) => ({ value: String(b.key), count: b.doc_count }));

/**
 * The analytics report by aggregations: one request for the counts, then the click-through
 * join a page of click pairs at a time (memory bounded by the page, not the log).
 */
export async function esReport(
  indices: EsIndices,
  datasetId: string,
  spec: ReportSpec,
): Promise<Report> {
  const index = indices.shared('events');
  const r = await indices.client.search({ index, ...reportBody(datasetId, spec) });
  const aggs = r.aggregations as unknown as {
    intervals: {
      buckets: Array<{
        key: number;
        requests: { types: Terms };
        events: { types: Terms };
        searches: { doc_count: number; zero: { doc_count: number } };
      }>;
    };
    filters: { top: Terms };
    sorts: { top: Terms };
    clicked: { top: Terms };
    shown: { types: Terms };
  };
  const rows: Parameters<typeof reportIntervals>[1] = [];
  const searches: Parameters<typeof reportIntervals>[2] = [];
  for (const b of aggs.intervals.buckets) {
    for (const t of b.requests.types.buckets)
      rows.push({ start: b.key, kind: 'request', type: String(t.key), count: t.doc_count });
    for (const t of b.events.types.buckets)
      rows.push({ start: b.key, kind: 'track', type: String(t.key), count: t.doc_count });
    if (b.searches.doc_count)
      searches.push({
        start: b.key,
        searches: b.searches.doc_count,
        zero: b.searches.zero.doc_count,
      });
  }
  const shown = new Map(aggs.shown.types.buckets.map((b) => [String(b.key), b.doc_count]));
  const clicks = await clickThroughClicks(indices, datasetId, spec);
  return {
    spec,
    intervals: reportIntervals(spec, rows, searches),
    searches: searchTotals(searches),
    topFilters: rankedOf(aggs.filters.top),
    topSortFields: rankedOf(aggs.sorts.top),
    topClickedIds: rankedOf(aggs.clicked.top),
    clickThrough: Object.fromEntries(
      CLICK_THROUGH_TYPES.map((t) => [t, clickThrough(shown.get(t) ?? 0, clicks.get(t) ?? 0)]),
    ) as Record<ClickThroughType, ReturnType<typeof clickThrough>>,
  };
}

/** Clicks per request type whose results showed the clicked id on the click's page view. */
async function clickThroughClicks(
  indices: EsIndices,
  datasetId: string,
  spec: ReportSpec,
): Promise<Map<string, number>> {
  const index = indices.shared('events');
  const out = new Map<string, number>();
  let after: Dsl | undefined;
  for (;;) {
    const page = await indices.client.search({
      index,
      ...clickPairsBody(datasetId, spec, after),
    });
    const composite = (
      page.aggregations as unknown as {
        pairs: {
          buckets: Array<{ key: { pv: string; id: string }; doc_count: number }>;
          after_key?: Dsl;
        };
      }
    ).pairs;
    if (!composite.buckets.length) return out;
    const pairs = composite.buckets.map((b) => b.key);
    const shown = await indices.client.search({ index, ...shownPairsBody(datasetId, pairs) });
    const matched = (
      shown.aggregations as unknown as {
        pairs: { buckets: Record<string, { types: Terms }> };
      }
    ).pairs.buckets;
    composite.buckets.forEach((b, i) => {
      for (const t of matched[String(i)]?.types.buckets ?? [])
        out.set(String(t.key), (out.get(String(t.key)) ?? 0) + b.doc_count);
    });
    if (!composite.after_key || composite.buckets.length < CLICK_PAIRS_PAGE) return out;
    after = composite.after_key;
  }
}
