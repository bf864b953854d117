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
import { type Db, stmt } from './db';

/** The UTC start of an event's interval, in SQL (the same bounds as domain calendarKey). */
function bucketSql(unit: CalendarInterval): string {
  switch (unit) {
    case 'hour':
      return '(at / 3600000) * 3600000';
    case 'day':
      return '(at / 86400000) * 86400000';
    case 'week':
      // 1970-01-05 (345,600,000 ms) was a Monday
      return '((at - 345600000) / 604800000) * 604800000 + 345600000';
    case 'month':
      return "CAST(strftime('%s', at / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000";
  }
}

/** The dataset's events of the report's range (`e` names the table where a query joins). */
const inRange = (e = ''): string => `${e}dataset_id = @ds AND ${e}at >= @from AND ${e}at < @to`;
const IN_RANGE = inRange();
const CT_TYPES = CLICK_THROUGH_TYPES.map((t) => `'${t}'`).join(', ');

/**
 * The analytics report by SQL aggregation over the events of the range (the index on
 * dataset and time bounds what is read); ties are ordered bytewise, as Elasticsearch orders
 * keyword terms, so both engines list the same entries.
 */
export function sqliteReport(db: Db, datasetId: string, spec: ReportSpec): Report {
  const p = { ds: datasetId, from: spec.from, to: spec.to, top: spec.top };
  const bucket = bucketSql(spec.interval);
  const counts = stmt(
    db,
    `SELECT start, kind, type, n AS count FROM (
       SELECT start, kind, type, n,
         ROW_NUMBER() OVER (PARTITION BY start, kind ORDER BY n DESC, type) AS rank
       FROM (SELECT ${bucket} AS start, kind, type, COUNT(*) AS n FROM events
             WHERE ${IN_RANGE} GROUP BY start, kind, type))
     WHERE kind = 'request' OR rank <= ${LIMITS.reportMaxActions}`,
  ).all(p) as Array<{ start: number; kind: 'request' | 'track'; type: string; count: number }>;
  const searches = stmt(
    db,
    `SELECT ${bucket} AS start, COUNT(*) AS searches, SUM(total = 0) AS zero FROM events
     WHERE ${IN_RANGE} AND kind = 'request' AND type = 'search' GROUP BY start`,
  ).all(p) as Array<{ start: number; searches: number; zero: number }>;
  const ranked = (sql: string): Ranked[] => stmt(db, sql).all(p) as Ranked[];
  const topFilters = ranked(
    `SELECT j.value AS value, COUNT(*) AS count FROM events e, json_each(e.filters) j
     WHERE ${inRange('e.')} AND e.kind = 'request'
     GROUP BY j.value ORDER BY count DESC, value LIMIT @top`,
  );
  const topSortFields = ranked(
    `SELECT sort AS value, COUNT(*) AS count FROM events
     WHERE ${IN_RANGE} AND kind = 'request' AND sort IS NOT NULL
     GROUP BY sort ORDER BY count DESC, value LIMIT @top`,
  );
  const topClickedIds = ranked(
    `SELECT item_id AS value, COUNT(*) AS count FROM events
     WHERE ${IN_RANGE} AND kind = 'track' AND type = '${CLICK_ACTION}' AND item_id IS NOT NULL
     GROUP BY item_id ORDER BY count DESC, value LIMIT @top`,
  );
  const shown = new Map(
    (
      stmt(
        db,
        `SELECT type, COUNT(*) AS n FROM events
         WHERE ${IN_RANGE} AND kind = 'request' AND type IN (${CT_TYPES})
           AND page_view_id IS NOT NULL
         GROUP BY type`,
      ).all(p) as Array<{ type: string; n: number }>
    ).map((r) => [r.type, r.n]),
  );
  // A click counts once per request type whose results, on its page view, showed its id; the
  // request may be older than the range.
  const clicks = new Map(
    (
      stmt(
        db,
        `SELECT r.type AS type, COUNT(DISTINCT c.id) AS n FROM events c
         JOIN events r ON r.dataset_id = c.dataset_id AND r.page_view_id = c.page_view_id
           AND r.kind = 'request' AND r.type IN (${CT_TYPES})
         WHERE ${inRange('c.')} AND c.kind = 'track'
           AND c.type = '${CLICK_ACTION}' AND c.item_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM json_each(r.shown) j WHERE j.value = c.item_id)
         GROUP BY r.type`,
      ).all(p) as Array<{ type: string; n: number }>
    ).map((r) => [r.type, r.n]),
  );
  return {
    spec,
    intervals: reportIntervals(spec, counts, searches),
    searches: searchTotals(searches),
    topFilters,
    topSortFields,
    topClickedIds,
    clickThrough: Object.fromEntries(
      CLICK_THROUGH_TYPES.map((t) => [t, clickThrough(shown.get(t) ?? 0, clicks.get(t) ?? 0)]),
    ) as Record<ClickThroughType, ReturnType<typeof clickThrough>>,
  };
}
