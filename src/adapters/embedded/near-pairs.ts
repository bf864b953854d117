import { pictureKeys } from '../../domain/duplicates';
import type { FoundNeighbours } from '../../ports/search-engine';
import { stmt, type Db } from './db';
import { slicer, type NearIndex } from './near-index';
import { dot, topK, type Matrix } from './vector-cache';
import { itemsByPk } from './vector-hits';

/**
 * The neighbours of each of `ids` among `rows` (processed items with a vector): up to `k` within
 * cosine distance `maxDistance`, closest first, then by id. Every row is compared, or with an
 * `index` the rows of the query's probed clusters that may be that close. Between queries the event loop gets a turn
 * (an exact scan of 100,000 vectors takes a tenth of a second). Every distance comes from the
 * float32 vectors stored when the pair is scored (topK rescores from SQLite), so an item
 * re-processed during a slow search is never kept at its old distance.
 */
export async function nearPairs(
  db: Db,
  datasetId: string,
  m: Matrix,
  rows: readonly number[],
  ids: readonly string[],
  maxDistance: number,
  k: number,
  index?: NearIndex,
): Promise<FoundNeighbours[]> {
  if (!ids.length || !rows.length) return [];
  const pks = (
    stmt(
      db,
      `SELECT pk FROM items WHERE dataset_id = ? AND id IN (${ids.map(() => '?').join(',')})`,
    ).all(datasetId, ...ids) as Array<{ pk: number }>
  ).map((r) => r.pk);
  const ranked = new Set(rows);
  const queries = pks.flatMap((pk) => {
    const row = m.rowOf.get(pk);
    return row !== undefined && ranked.has(row) ? [row] : [];
  });
  const floor = 1 - maxDistance;
  const pause = slicer();
  const found: Array<{ row: number; near: Array<{ row: number; d: number }> }> = [];
  const own = m.floats(queries);
  for (const row of queries) {
    const query = own.get(row);
    if (!query) continue;
    const candidates = index?.near(row, query, floor, k + Math.max(3 * k, 16));
    found.push({
      row,
      near: (candidates
        ? rescored(m, query, candidates.rows)
        : topK(m, query, k, rows, new Set([row]))
      )
        .filter((t) => t.d >= floor)
        .slice(0, k),
    });
    await pause();
  }
  const items = itemsByPk(
    db,
    [...new Set(found.flatMap((f) => [m.pks[f.row]!, ...f.near.map((n) => m.pks[n.row]!)]))],
    datasetId,
  );
  return found.flatMap((f) => {
    const item = items.get(m.pks[f.row]!);
    if (item?.state !== 'processed') return [];
    const neighbours = f.near.flatMap((n) => {
      const other = items.get(m.pks[n.row]!);
      return other?.state === 'processed'
        ? [
            {
              id: other.id,
              distance: 1 - n.d,
              processedAt: other.image?.processedAt ?? 0,
              ...pictureKeys(other.image),
            },
          ]
        : [];
    });
    neighbours.sort((a, b) => a.distance - b.distance || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return [
      {
        id: item.id,
        processedAt: item.image?.processedAt ?? 0,
        ...pictureKeys(item.image),
        neighbours,
      },
    ];
  });
}

/** The rows by their exact dot product with `query`, from their stored vectors, best first. */
function rescored(
  m: Matrix,
  query: Float32Array,
  rows: number[],
): Array<{ row: number; d: number }> {
  const floats = m.floats(rows);
  return rows
    .flatMap((row) => {
      const v = floats.get(row);
      return v ? [{ row, d: dot(query, v) }] : [];
    })
    .sort((a, b) => b.d - a.d);
}
