import type { StoredItem } from '../../domain/item';
import type { ScoredItem } from '../../ports/search-engine';
import type { ItemRow } from './item-row';
import { toStoredItem } from './item-row';
import { stmt, type Db } from './db';
import type { Matrix } from './vector-cache';
import { cosineScore } from './vectors';

// What both embedded engines (the in-memory index and the SQL reference) do around the vector
// scan: the rows a request leaves out, and the scored hits it answers.

/**
 * The stored items of these pks, by pk (a pk no longer there is left out, and with `datasetId`
 * one now of another dataset: SQLite may give a deleted item's pk to a new item).
 */
export function itemsByPk(db: Db, pks: number[], datasetId?: string): Map<number, StoredItem> {
  if (!pks.length) return new Map();
  const among = `pk IN (${pks.map(() => '?').join(',')})`;
  const rows = (
    datasetId === undefined
      ? stmt(db, `SELECT * FROM items WHERE ${among}`).all(...pks)
      : stmt(db, `SELECT * FROM items WHERE dataset_id = ? AND ${among}`).all(datasetId, ...pks)
  ) as ItemRow[];
  return new Map(rows.map((r) => [r.pk, toStoredItem(r)]));
}

/** Matrix rows of the items a request excludes by id. */
export function excludedRows(db: Db, datasetId: string, m: Matrix, ids: string[]): Set<number> {
  const skip = new Set<number>();
  if (!ids.length) return skip;
  const excluded = stmt(
    db,
    `SELECT pk FROM items WHERE dataset_id = ? AND id IN (${ids.map(() => '?').join(',')})`,
  ).all(datasetId, ...ids) as Array<{ pk: number }>;
  for (const e of excluded) {
    const row = m.rowOf.get(e.pk);
    if (row !== undefined) skip.add(row);
  }
  return skip;
}

/** The nearest rows as hits, best first; an item no longer processed is left out. */
export function scoredHits(
  db: Db,
  m: Matrix,
  top: Array<{ row: number; d: number }>,
  includeVectors: boolean | undefined,
): ScoredItem[] {
  const items = itemsByPk(
    db,
    top.map((t) => m.pks[t.row]!),
  );
  const floats = includeVectors ? m.floats(top.map((t) => t.row)) : undefined;
  return top.flatMap((t) => {
    const item = items.get(m.pks[t.row]!);
    if (!item || item.state !== 'processed') return [];
    const vector = floats?.get(t.row);
    return [{ item, score: cosineScore(t.d), ...(vector ? { vector: Array.from(vector) } : {}) }];
  });
}
