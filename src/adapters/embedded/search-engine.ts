import type { StoredItem } from '../../domain/item';
import type { Condition } from '../../query/ast';
import type {
  Facets,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  SimilarRequest,
} from '../../ports/search-engine';
import { blobVector, cosineScore, dot } from './vectors';
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

  /** Exact search: every matching vector is compared (fine for the catalogues this engine is for). */
  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    return guarded(() => {
      const where = whereClause(datasetId, req.conditions);
      const exclude = req.excludeIds.length
        ? ` AND i.id NOT IN (${req.excludeIds.map(() => '?').join(',')})`
        : '';
      const query = Float32Array.from(req.vector);
      const top: Array<{ pk: number; d: number; v: Float32Array }> = [];
      const rows = this.db
        .prepare(
          `SELECT i.pk, v.vec FROM items i JOIN item_vectors v ON v.item_pk = i.pk
           WHERE ${where.sql} AND v.embedder = ?${exclude}`,
        )
        .iterate(...where.params, req.embedder, ...req.excludeIds) as Iterable<{
        pk: number;
        vec: Buffer;
      }>;
      for (const r of rows) {
        const v = blobVector(r.vec);
        const d = dot(query, v);
        if (top.length < req.limit) {
          top.push({ pk: r.pk, d, v });
          if (top.length === req.limit) top.sort((a, b) => b.d - a.d);
        } else if (d > top[top.length - 1]!.d) {
          top[top.length - 1] = { pk: r.pk, d, v };
          top.sort((a, b) => b.d - a.d);
        }
      }
      top.sort((a, b) => b.d - a.d);
      if (!top.length) return [];
      const items = new Map(
        (
          this.db
            .prepare(`SELECT * FROM items WHERE pk IN (${top.map(() => '?').join(',')})`)
            .all(...top.map((t) => t.pk)) as ItemRow[]
        ).map((r) => [r.pk, toStoredItem(r)]),
      );
      return top.map((t) => ({
        item: items.get(t.pk)!,
        score: cosineScore(t.d),
        ...(req.includeVectors ? { vector: Array.from(t.v) } : {}),
      }));
    });
  }

  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return guarded(() => {
      const where = whereClause(datasetId, conditions);
      // A seeded hash order (pk XOR seed, then Knuth's multiplicative hash): random per request,
      // reproducible for a given seed.
      const rows = this.db
        .prepare(
          `SELECT i.* FROM items i WHERE ${where.sql}
           ORDER BY ((((i.pk | ?) - (i.pk & ?)) * 2654435761) % 4294967296) LIMIT ?`,
        )
        .all(...where.params, seed, seed, limit) as ItemRow[];
      return rows.map(toStoredItem);
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
