import type { ProcessingJob, StoredItem } from '../../domain/item';
import type { Metadata } from '../../domain/metadata';
import type { JobPage } from '../../ports/item-processing';
import type { Statement } from 'better-sqlite3';
import type { Db } from './db';

/** A row of the items table. */
export interface ItemRow {
  pk: number;
  dataset_id: string;
  id: string;
  url: string;
  metadata: string;
  private_metadata: string;
  state: StoredItem['state'];
  image_width: number | null;
  image_height: number | null;
  image_url: string | null;
  image_processed_at: number | null;
  image_pixel_hash: string | null;
  image_copy_signature: string | null;
  created_at: number;
  updated_at: number;
  popularity: number;
  purchases: number;
}

export const toStoredItem = (r: ItemRow): StoredItem => ({
  id: r.id,
  url: r.url,
  metadata: JSON.parse(r.metadata) as Metadata,
  privateMetadata: JSON.parse(r.private_metadata) as Metadata,
  state: r.state,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  counts: { popularity: r.popularity, purchases: r.purchases },
  ...(r.state === 'processed' && r.image_width !== null
    ? {
        image: {
          width: r.image_width,
          height: r.image_height ?? 0,
          url: r.image_url ?? r.url,
          ...(r.image_processed_at !== null ? { processedAt: r.image_processed_at } : {}),
          ...(r.image_pixel_hash !== null ? { pixelHash: r.image_pixel_hash } : {}),
          ...(r.image_copy_signature ? { copySignature: r.image_copy_signature } : {}),
        },
      }
    : {}),
});

/** The row fields a job needs. */
export interface JobRow {
  pk: number;
  dataset_id: string;
  id: string;
  url: string;
}

/** Rows in pk order as jobs; a full page carries the cursor for the next one. */
export const jobPage = (rows: JobRow[], limit: number): JobPage => ({
  jobs: rows.map((r): ProcessingJob => ({
    datasetId: r.dataset_id,
    itemId: r.id,
    url: r.url,
    attempt: 1,
  })),
  ...(rows.length === limit ? { next: String(rows[rows.length - 1]!.pk) } : {}),
});

export const chunks = <T>(xs: T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

/** The statements that a client's write and a worker's result both run on an item. */
type ItemStatement =
  'insValue' | 'delValues' | 'delImageValues' | 'delError' | 'bumpVectors' | 'putVector';

export function itemStatements(db: Db): Record<ItemStatement, Statement> {
  return {
    insValue: db.prepare(
      'INSERT INTO item_values (item_pk, dataset_id, field, scope, is_array, vtype, sval, nval) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    delValues: db.prepare('DELETE FROM item_values WHERE item_pk = ? AND scope IN (?, ?)'),
    // the generated rows processing made; the counts are the roll-up's and outlive a new url
    delImageValues: db.prepare(
      `DELETE FROM item_values WHERE item_pk = ? AND scope = 'gen'
         AND field NOT IN ('service_popularity', 'service_purchases')`,
    ),
    delError: db.prepare('DELETE FROM processing_errors WHERE dataset_id = ? AND item_id = ?'),
    // Every change to a dataset's vectors bumps its version, so in-memory copies (the exact
    // search's matrix, possibly in another process) know to reload.
    bumpVectors: db.prepare(
      `INSERT INTO vector_versions (dataset_id, version) VALUES (?, 1)
       ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1`,
    ),
    putVector: db.prepare(
      'INSERT OR REPLACE INTO item_vectors (item_pk, dataset_id, embedder, vec) VALUES (?, ?, ?, ?)',
    ),
  };
}
