import type { FoundNeighbours, PictureKeys } from '../../ports/search-engine';
import { stmt, type Db } from './db';
import type { NearIndex } from './near-index';
import { slicer } from './slicer';
import { dot, topK, type Matrix } from './vector-cache';

/** Items read per statement (SQLite allows 32,766 parameters; smaller lists plan faster). */
const PK_CHUNK = 500;

/**
 * The neighbours of each of `ids` among `rows` (processed items with a vector): up to `k` within
 * cosine distance `maxDistance`, closest first, then by id. Every row is compared, or with an
 * `index` the rows of the query's probed clusters that may be that close. Between queries the
 * event loop gets a turn. Every distance comes from the float32 vectors stored when the pair is
 * scored (candidates are rescored from SQLite), so an item re-processed during a slow search is
 * never kept at its old distance.
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
  const ranked = new Uint8Array(m.pks.length);
  for (const row of rows) ranked[row] = 1;
  const queries = pks.flatMap((pk) => {
    const row = m.rowOf.get(pk);
    return row !== undefined && ranked[row] ? [row] : [];
  });
  const floor = 1 - maxDistance;
  const pause = slicer();
  const found: Array<{ row: number; near: Array<{ row: number; d: number }> }> = [];
  const own = m.floats(queries);
  for (const row of queries) {
    const query = own.get(row);
    if (!query) continue;
    const candidates = index?.near(row, query, floor, k + Math.max(k, 16));
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
  const items = pairKeys(
    db,
    [...new Set(found.flatMap((f) => [m.pks[f.row]!, ...f.near.map((n) => m.pks[n.row]!)]))],
    datasetId,
  );
  return found.flatMap((f) => {
    const item = items.get(m.pks[f.row]!);
    if (!item) return [];
    const neighbours = f.near.flatMap((n) => {
      const other = items.get(m.pks[n.row]!);
      return other ? [{ ...other, distance: 1 - n.d }] : [];
    });
    neighbours.sort((a, b) => a.distance - b.distance || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return [{ ...item, neighbours }];
  });
}

/**
 * What a pair records of each processed item among these pks (by pk), read without the item's
 * metadata: a pass reads hundreds of neighbours per batch. An item of another dataset (SQLite
 * may give a deleted item's pk to a new one) or not processed is left out.
 */
function pairKeys(
  db: Db,
  pks: number[],
  datasetId: string,
): Map<number, { id: string; processedAt: number } & PictureKeys> {
  const out = new Map<number, { id: string; processedAt: number } & PictureKeys>();
  for (let c = 0; c < pks.length; c += PK_CHUNK) {
    const chunk = pks.slice(c, c + PK_CHUNK);
    const rows = stmt(
      db,
      `SELECT pk, id, image_processed_at, image_pixel_hash, image_copy_signature FROM items
       WHERE dataset_id = ? AND state = 'processed' AND pk IN (${chunk.map(() => '?').join(',')})`,
    ).all(datasetId, ...chunk) as Array<{
      pk: number;
      id: string;
      image_processed_at: number | null;
      image_pixel_hash: string | null;
      image_copy_signature: string | null;
    }>;
    for (const r of rows)
      out.set(r.pk, {
        id: r.id,
        processedAt: r.image_processed_at ?? 0,
        ...(r.image_pixel_hash ? { pixelHash: r.image_pixel_hash } : {}),
        ...(r.image_copy_signature ? { copySignature: r.image_copy_signature } : {}),
      });
  }
  return out;
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
