import { pictureKeys } from '../../domain/duplicates';
import type { FoundNeighbours } from '../../ports/search-engine';
import { stmt, type Db } from './db';
import { slicer, type NearIndex } from './near-index';
import { dot, topK, type Matrix } from './vector-cache';
import { itemsByPk } from './vector-hits';
import { blobVector } from './vectors';

/**
 * The neighbours of each of `ids` among `rows` (processed items with a vector): up to `k` within
 * cosine distance `maxDistance`, closest first, then by id. Every row is compared, or with an
 * `index` every row of the query's probed clusters. Between queries the event loop gets a turn
 * (an exact scan of 100,000 vectors takes a tenth of a second). If `m` is no longer `current`
 * by the end (an item re-processed or deleted meanwhile), the pairs found are scored again from
 * the vectors stored now: a pair is never kept with a distance its items no longer have.
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
  current: () => boolean = () => true,
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
    const lists = index?.candidates(row);
    const among = lists ? concat(lists) : rows;
    found.push({
      row,
      near: topK(m, query, k + 1, among, new Set([row]))
        .filter((t) => t.d >= floor)
        .slice(0, k),
    });
    await pause();
  }
  if (!current()) rescore(db, datasetId, m, found, floor);
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

/**
 * Replaces each found pair's similarity with the one of the items' vectors stored now (same
 * dataset and embedder), dropping pairs beyond `floor` and items without a vector now.
 */
function rescore(
  db: Db,
  datasetId: string,
  m: Matrix,
  found: Array<{ row: number; near: Array<{ row: number; d: number }> }>,
  floor: number,
): void {
  const pks = [...new Set(found.flatMap((f) => [f.row, ...f.near.map((n) => n.row)]))].map(
    (row) => m.pks[row]!,
  );
  const now = new Map(
    (
      stmt(
        db,
        `SELECT item_pk, vec FROM item_vectors WHERE dataset_id = ? AND embedder = ? AND length(vec) > 0 AND item_pk IN (${pks.map(() => '?').join(',')})`,
      ).all(datasetId, m.embedder, ...pks) as Array<{ item_pk: number; vec: Buffer }>
    ).map((r) => [r.item_pk, blobVector(r.vec)]),
  );
  for (const f of found) {
    const q = now.get(m.pks[f.row]!);
    f.near = !q
      ? []
      : f.near
          .flatMap((n) => {
            const v = now.get(m.pks[n.row]!);
            return v ? [{ row: n.row, d: dot(q, v) }] : [];
          })
          .filter((n) => n.d >= floor)
          .sort((a, b) => b.d - a.d);
  }
}

function* concat(lists: Int32Array[]): Iterable<number> {
  for (const l of lists) yield* l;
}
