import {
  calendarGrain,
  calendarKey,
  facetFigure,
  histogram,
  numberText,
  numericKey,
  onField,
  statsFigure,
  type FiguresSpec,
  type Figures,
  type HistogramSpec,
  type ValueCount,
} from '../../src/domain/figures';
import type { Condition } from '../../src/query/ast';
import { type Db, stmt } from '../../src/adapters/embedded/db';
import { QUERYABLE, whereClause } from './sql-query';
import { keyed } from '../../src/domain/keyed';

/**
 * Contract §10 on SQLite: every figure is one GROUP BY over the value index (item_values) or
 * the items table, restricted to the matching items by the same WHERE as search; ordering,
 * `other` and histogram buckets come from domain/figures.ts, as on Elasticsearch.
 */
export function sqlFigures(
  db: Db,
  datasetId: string,
  conditions: Condition[],
  spec: FiguresSpec,
): Figures {
  const matching = (conds: Condition[]) => {
    const w = whereClause(datasetId, conds);
    return { sql: `SELECT i.pk FROM items i WHERE ${w.sql}`, params: w.params };
  };
  const all = matching(conditions);
  const out: Figures = {};
  // Matching items counted once per set of conditions (facets without disjunction share one).
  const totals = new Map<string, number>();
  const totalOf = (m: { sql: string; params: unknown[] }): number => {
    const key = `${m.sql}\u0000${JSON.stringify(m.params)}`;
    let n = totals.get(key);
    if (n === undefined) {
      n = (stmt(db, `SELECT COUNT(*) AS n FROM (${m.sql})`).get(...m.params) as { n: number }).n;
      totals.set(key, n);
    }
    return n;
  };

  if (spec.facets.length) {
    out.facets = keyed();
    for (const { field, disjunctive } of spec.facets) {
      const m = disjunctive ? matching(conditions.filter((c) => !onField(c, field))) : all;
      const rows = stmt(
        db,
        `SELECT v.vtype, v.sval, v.nval, COUNT(*) AS n FROM item_values v
         WHERE v.dataset_id = ? AND v.field = ? AND v.${QUERYABLE} AND v.item_pk IN (${m.sql})
         GROUP BY v.vtype, v.sval, v.nval`,
      ).all(datasetId, field, ...m.params) as Array<{
        vtype: string;
        sval: string | null;
        nval: number | null;
        n: number;
      }>;
      const { holding } = stmt(
        db,
        `SELECT COUNT(DISTINCT v.item_pk) AS holding FROM item_values v
         WHERE v.dataset_id = ? AND v.field = ? AND v.${QUERYABLE} AND v.item_pk IN (${m.sql})`,
      ).get(datasetId, field, ...m.params) as { holding: number };
      const values: ValueCount[] = rows.map((r) =>
        r.vtype === 'n'
          ? { num: r.nval!, text: numberText(r.nval!), count: r.n }
          : { text: r.sval ?? '', count: r.n },
      );
      out.facets[field] = facetFigure(values, spec.facetSize, totalOf(m) - holding);
    }
  }

  if (spec.stats.length) {
    out.stats = keyed();
    for (const field of spec.stats) {
      const r = numericSummary(db, datasetId, field, all);
      out.stats[field] = statsFigure(r.n, r.lo ?? 0, r.hi ?? 0, r.total ?? 0);
    }
  }

  if (spec.histograms.length) {
    out.histograms = keyed();
    for (const h of spec.histograms) out.histograms[h.field] = histogramOf(db, datasetId, h, all);
  }
  return out;
}

interface Summary {
  n: number;
  lo: number | null;
  hi: number | null;
  total: number | null;
}

function numericSummary(
  db: Db,
  datasetId: string,
  field: string,
  m: { sql: string; params: unknown[] },
): Summary {
  return stmt(
    db,
    `SELECT COUNT(v.nval) AS n, MIN(v.nval) AS lo, MAX(v.nval) AS hi, SUM(v.nval) AS total
     FROM item_values v
     WHERE v.dataset_id = ? AND v.field = ? AND v.${QUERYABLE} AND v.vtype = 'n' AND v.item_pk IN (${m.sql})`,
  ).get(datasetId, field, ...m.params) as Summary;
}

function histogramOf(
  db: Db,
  datasetId: string,
  h: HistogramSpec,
  m: { sql: string; params: unknown[] },
) {
  const counts = new Map<number, number>();
  const add = (key: number, n: number) => counts.set(key, (counts.get(key) ?? 0) + n);
  if ('calendar' in h) {
    const col = h.field === 'service_created_at' ? 'created_at' : 'updated_at';
    const base = calendarGrain(h.calendar);
    // Grouped by hour or day in SQL, then by week or month here (those start on a day).
    const rows = stmt(
      db,
      `SELECT i.${col} / ${base} AS b, COUNT(*) AS n, MIN(i.${col}) AS lo, MAX(i.${col}) AS hi
       FROM items i WHERE i.pk IN (${m.sql}) GROUP BY b`,
    ).all(...m.params) as Array<{ b: number; n: number; lo: number; hi: number }>;
    let lo: number | null = null;
    let hi: number | null = null;
    for (const r of rows) {
      add(calendarKey(r.b * base, h.calendar), r.n);
      lo = lo === null ? r.lo : Math.min(lo, r.lo);
      hi = hi === null ? r.hi : Math.max(hi, r.hi);
    }
    return histogram(h, lo, hi, counts);
  }
  const s = numericSummary(db, datasetId, h.field, m);
  if (s.n === 0) return [];
  // Checks the bucket limit before grouping anything.
  histogram(h, s.lo, s.hi, counts);
  const rows = stmt(
    db,
    `SELECT v.nval AS value, COUNT(*) AS n FROM item_values v
     WHERE v.dataset_id = ? AND v.field = ? AND v.${QUERYABLE} AND v.vtype = 'n' AND v.item_pk IN (${m.sql})
     GROUP BY v.nval`,
  ).all(datasetId, h.field, ...m.params) as Array<{ value: number; n: number }>;
  for (const r of rows) add(numericKey(r.value, h.interval), r.n);
  return histogram(h, s.lo, s.hi, counts);
}
