import type { FiguresSpec, Figures } from '../../src/domain/figures';
import type { StoredItem } from '../../src/domain/item';
import type { Condition } from '../../src/query/ast';
import type {
  Facets,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  RankedSet,
  SimilarRequest,
  TuningPage,
} from '../../src/ports/search-engine';
import { VectorCache, dot } from '../../src/adapters/embedded/vector-cache';
import { excludedRows, scoredHits } from '../../src/adapters/embedded/vector-hits';
import type { ItemRow } from '../../src/adapters/embedded/item-row';
import { toStoredItem } from '../../src/adapters/embedded/item-row';
import { type Db, stmt } from '../../src/adapters/embedded/db';
import { blobVector } from '../../src/adapters/embedded/vectors';
import type { NeighbourEntry } from '../../src/ports/duplicate-store';
import { QUERYABLE, sortSql, whereClause } from './sql-query';
import { sqlFigures } from './sql-figures';
import { keyed } from '../../src/domain/keyed';

const MAX_FACET_VALUES = 1000;

/**
 * A second embedded engine, every query SQL over the value tables: written independently of
 * the in-memory index, it is the oracle the production engine is compared with
 * (test/unit/embedded-index-*.ts). Not used by the service.
 */
export class SqlSearchEngine implements SearchEngine {
  constructor(private readonly db: Db) {
    this.vectors = new VectorCache(db);
  }

  // Grouping is checked against a brute-force model over the items (test/e2e/groups.test.ts),
  // not against this oracle.
  searchGroups(): Promise<never> {
    return Promise.reject(new Error('the SQL oracle does not model grouping'));
  }

  groupCounts(): Promise<never> {
    return Promise.reject(new Error('the SQL oracle does not model grouping'));
  }

  async search(
    datasetId: string,
    req: SearchRequest,
  ): Promise<{ items: StoredItem[]; total: number }> {
    const where = whereClause(datasetId, req.conditions);
    const sort = sortSql(req.sort);
    // One pass computes the page and the total (the filter is the expensive part).
    const rows = stmt(
      this.db,
      `SELECT i.*${sort.columns}, COUNT(*) OVER () AS total_rows FROM items i
           WHERE ${where.sql} ${sort.order} LIMIT ? OFFSET ?`,
    ).all(...sort.columnParams, ...where.params, req.limit, req.offset) as Array<
      ItemRow & { total_rows: number }
    >;
    // A page past the end has no row to carry the total.
    const total = rows.length
      ? rows[0]!.total_rows
      : (
          stmt(this.db, `SELECT COUNT(*) AS n FROM items i WHERE ${where.sql}`).get(
            ...where.params,
          ) as { n: number }
        ).n;
    return { items: rows.map(toStoredItem), total };
  }

  private readonly vectors: VectorCache;

  /**
   * Exact search: every matching vector's stored float32 copy is compared (the catalogues this
   * engine is for are small enough); q narrows the rows through SQL.
   */
  async similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    const m = this.vectors.get(datasetId, req.embedder);
    if (!m.pks.length || req.limit <= 0) return [];
    const skip = excludedRows(this.db, datasetId, m, req.excludeIds);
    let rows: number[] | undefined;
    if (req.conditions.length) {
      const where = whereClause(datasetId, req.conditions);
      rows = [];
      for (const r of stmt(this.db, `SELECT i.pk FROM items i WHERE ${where.sql}`)
        .pluck()
        .iterate(...where.params) as Iterable<number>) {
        const row = m.rowOf.get(r);
        if (row !== undefined) rows.push(row);
      }
    }
    // brute force over the stored float32 vectors: the reference for the int8 scan + rescoring
    const among = (rows ?? Array.from(m.pks, (_, r) => r)).filter((r) => !skip.has(r));
    const floats = m.floats(among);
    const query = Float32Array.from(req.vector);
    const top = among
      .flatMap((row) => {
        const v = floats.get(row);
        return v ? [{ row, d: dot(query, v) }] : [];
      })
      .sort((a, b) => b.d - a.d)
      .slice(0, req.limit);
    return scoredHits(this.db, m, top, req.includeVectors);
  }

  /** The reference: every pair's cosine from the stored BLOBs, no matrix, no top-k. */
  async neighbours(
    datasetId: string,
    embedder: string,
    ids: readonly string[],
    maxDistance: number,
    k: number,
  ): Promise<NeighbourEntry[]> {
    const rows = stmt(
      this.db,
      `SELECT i.id, i.image_processed_at AS at, v.vec FROM items i JOIN item_vectors v ON v.item_pk = i.pk
         WHERE i.dataset_id = ? AND i.state = 'processed' AND v.embedder = ? AND length(v.vec) > 0`,
    ).all(datasetId, embedder) as Array<{ id: string; at: number | null; vec: Buffer }>;
    const vecs = rows.map((r) => ({ id: r.id, at: r.at ?? 0, v: blobVector(r.vec) }));
    return ids.flatMap((id) => {
      const q = vecs.find((x) => x.id === id);
      if (!q) return [];
      const neighbours = vecs
        .filter((x) => x.id !== id)
        .map((x) => ({
          id: x.id,
          distance: 1 - x.v.reduce((s, f, i) => s + f * q.v[i]!, 0),
          processedAt: x.at,
        }))
        .filter((x) => x.distance <= maxDistance)
        .sort((a, b) => a.distance - b.distance || (a.id < b.id ? -1 : 1))
        .slice(0, k);
      return [{ id, processedAt: q.at, neighbours }];
    });
  }

  async applyTuning(): Promise<TuningPage> {
    return { changed: 0 };
  }

  async compact(): Promise<boolean> {
    return true;
  }

  async rankedCount(datasetId: string, set: RankedSet): Promise<number> {
    const m = this.vectors.get(datasetId, set.embedder);
    const skip = excludedRows(this.db, datasetId, m, set.excludeIds);
    const where = whereClause(datasetId, set.conditions);
    let n = 0;
    for (const pk of stmt(this.db, `SELECT i.pk FROM items i WHERE ${where.sql}`)
      .pluck()
      .iterate(...where.params) as Iterable<number>) {
      const row = m.rowOf.get(pk);
      if (row !== undefined && !skip.has(row)) n++;
    }
    return n;
  }

  async sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return this.sampleNow(datasetId, conditions, limit, seed);
  }

  /** sample, synchronously. */
  sampleNow(datasetId: string, conditions: Condition[], limit: number, seed: number): StoredItem[] {
    const where = whereClause(datasetId, conditions);
    // A seeded hash order (pk XOR seed, then Knuth's multiplicative hash): random per request,
    // reproducible for a given seed.
    const rows = stmt(
      this.db,
      `SELECT i.* FROM items i WHERE ${where.sql}
         ORDER BY ((((i.pk | ?) - (i.pk & ?)) * 2654435761) % 4294967296) LIMIT ?`,
    ).all(...where.params, seed, seed, limit) as ItemRow[];
    return rows.map(toStoredItem);
  }

  async facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    const where = whereClause(datasetId, conditions);
    const byValue = stmt(
      this.db,
      `SELECT v.vtype, v.sval, v.nval, COUNT(DISTINCT v.item_pk) AS n
         FROM item_values v JOIN items i ON i.pk = v.item_pk
         WHERE v.dataset_id = ? AND v.field = ? AND v.${QUERYABLE} AND ${where.sql}
         GROUP BY v.vtype, v.sval, v.nval ORDER BY n DESC, v.sval, v.nval LIMIT ${MAX_FACET_VALUES}`,
    );
    const out: Facets = keyed();
    for (const field of fields) {
      const rows = byValue.all(datasetId, field, ...where.params) as {
        vtype: string;
        sval: string | null;
        nval: number | null;
        n: number;
      }[];
      const counts = keyed<number>();
      for (const r of rows) {
        const key = r.vtype === 'n' ? String(r.nval) : (r.sval ?? '');
        counts[key] = (counts[key] ?? 0) + r.n;
      }
      out[field] = counts;
    }
    return out;
  }

  async figures(datasetId: string, conditions: Condition[], spec: FiguresSpec): Promise<Figures> {
    return sqlFigures(this.db, datasetId, conditions, spec);
  }
}
