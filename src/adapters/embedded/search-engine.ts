import type { StoredItem } from '../../domain/item';
import type { Condition } from '../../query/ast';
import type { Facets, SearchEngine, SearchRequest } from '../../ports/search-engine';
import type { ItemRow } from './content-store';
import { toStoredItem } from './content-store';
import { guarded, type Db } from './db';
import { sortSql, whereClause } from './sql-query';

const MAX_FACET_VALUES = 1000;

export class EmbeddedSearchEngine implements SearchEngine {
  constructor(private readonly db: Db) {}

  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }> {
    return guarded(() => {
      const where = whereClause(datasetId, req.conditions);
      const sort = sortSql(req.sort);
      // One pass computes the page and the total (the filter is the expensive part).
      const rows = this.db
        .prepare(
          `SELECT i.*${sort.columns}, COUNT(*) OVER () AS total_rows FROM items i
           WHERE ${where.sql} ${sort.order} LIMIT ? OFFSET ?`,
        )
        .all(...sort.columnParams, ...where.params, req.limit, req.offset) as Array<
        ItemRow & { total_rows: number }
      >;
      // A page past the end has no row to carry the total.
      const total = rows.length
        ? rows[0]!.total_rows
        : (
            this.db
              .prepare(`SELECT COUNT(*) AS n FROM items i WHERE ${where.sql}`)
              .get(...where.params) as { n: number }
          ).n;
      return { items: rows.map(toStoredItem), total };
    });
  }

  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    return guarded(() => {
      const where = whereClause(datasetId, conditions);
      const stmt = this.db.prepare(
        `SELECT v.vtype, v.sval, v.nval, COUNT(DISTINCT v.item_pk) AS n
         FROM item_values v JOIN items i ON i.pk = v.item_pk
         WHERE v.dataset_id = ? AND v.field = ? AND v.scope IN ('pub', 'gen') AND ${where.sql}
         GROUP BY v.vtype, v.sval, v.nval ORDER BY n DESC, v.sval, v.nval LIMIT ${MAX_FACET_VALUES}`,
      );
      const out: Facets = {};
      for (const field of fields) {
        const rows = stmt.all(datasetId, field, ...where.params) as {
          vtype: string;
          sval: string | null;
          nval: number | null;
          n: number;
        }[];
        const counts: Record<string, number> = {};
        for (const r of rows) {
          const key = r.vtype === 'n' ? String(r.nval) : (r.sval ?? '');
          counts[key] = (counts[key] ?? 0) + r.n;
        }
        out[field] = counts;
      }
      return out;
    });
  }
}
