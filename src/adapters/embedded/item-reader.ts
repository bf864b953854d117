import type { DatasetCounts } from '../../domain/dataset';
import type { ListEntry, ProcessingErrorRecord, StoredItem } from '../../domain/item';
import { groupRuns } from '../../domain/duplicates';
import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../../domain/limits';
import type { ValueKind } from '../../domain/metadata';
import {
  labelledVector,
  type ItemReader,
  type LabelledVector,
  type StoredEmbedding,
} from '../../ports/item-reader';
import type { FieldCatalogue } from '../../query/resolve';
import { count } from './bitset';
import { type Db, stmt } from './db';
import { MemoryIndexes } from './index-sync';
import { chunks, toStoredItem, type ItemRow } from './item-row';
import { blobVector } from './vectors';

/** ItemReader on the embedded SQLite file (counts from the search index when it is in memory). */
export class EmbeddedItemReader implements ItemReader {
  constructor(private readonly db: Db) {}

  async existingIds(datasetId: string, ids: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const part of chunks([...new Set(ids)], 500)) {
      const rows = stmt(
        this.db,
        `SELECT id FROM items WHERE dataset_id = ? AND id IN (${part.map(() => '?').join(',')})`,
      ).all(datasetId, ...part) as { id: string }[];
      for (const r of rows) found.add(r.id);
    }
    return found;
  }

  async list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]> {
    return (
      stmt(
        this.db,
        'SELECT id, url, state FROM items WHERE dataset_id = ? ORDER BY id LIMIT ? OFFSET ?',
      ).all(datasetId, limit, offset) as { id: string; url: string; state: string }[]
    ).map((r) => ({ id: r.id, url: r.url, processed: r.state === 'processed' }));
  }

  async getItems(datasetId: string, ids: string[]): Promise<StoredItem[]> {
    const out: StoredItem[] = [];
    for (const part of chunks([...new Set(ids)], 500)) {
      const rows = stmt(
        this.db,
        `SELECT * FROM items WHERE dataset_id = ? AND id IN (${part.map(() => '?').join(',')})`,
      ).all(datasetId, ...part) as ItemRow[];
      out.push(...rows.map(toStoredItem));
    }
    return out;
  }

  async counts(datasetId: string): Promise<DatasetCounts> {
    const errors = (
      stmt(this.db, 'SELECT COUNT(*) AS n FROM processing_errors WHERE dataset_id = ?').get(
        datasetId,
      ) as { n: number }
    ).n;
    // Every Vision request checks the processed count: counting 100,000 index entries in
    // SQL is most of a search's time, while the search index (when in memory) knows.
    const ix = MemoryIndexes.of(this.db).peek(datasetId);
    if (ix)
      return {
        items: ix.slotOfPk.size,
        processed: count(ix.processed),
        pending: count(ix.pending),
        errors,
      };
    const rows = stmt(
      this.db,
      'SELECT state, COUNT(*) AS n FROM items WHERE dataset_id = ? GROUP BY state',
    ).all(datasetId) as { state: string; n: number }[];
    const by = Object.fromEntries(rows.map((r) => [r.state, r.n])) as Record<string, number>;
    return {
      items: rows.reduce((s, r) => s + r.n, 0),
      processed: by.processed ?? 0,
      pending: by.pending ?? 0,
      errors,
    };
  }

  async catalogue(datasetId: string): Promise<FieldCatalogue> {
    const out = new Map<string, Set<ValueKind>>();
    const rows = stmt(
      this.db,
      "SELECT field, kind FROM field_kinds WHERE dataset_id = ? AND scope = 'pub'",
    ).all(datasetId) as {
      field: string;
      kind: ValueKind;
    }[];
    for (const r of rows) {
      if (!out.has(r.field)) out.set(r.field, new Set());
      out.get(r.field)!.add(r.kind);
    }
    return out;
  }

  async publicFields(datasetId: string): Promise<string[]> {
    const rows = stmt(
      this.db,
      "SELECT DISTINCT field FROM field_kinds WHERE dataset_id = ? AND scope = 'pub' ORDER BY field",
    ).all(datasetId) as { field: string }[];
    return [...rows.map((r) => r.field), ...GENERATED_FIELDS, ...SERVICE_TIME_FIELDS];
  }

  async getEmbedding(datasetId: string, id: string): Promise<StoredEmbedding | undefined> {
    const r = stmt(
      this.db,
      `SELECT i.state, v.embedder, v.vec FROM items i LEFT JOIN item_vectors v ON v.item_pk = i.pk
           WHERE i.dataset_id = ? AND i.id = ?`,
    ).get(datasetId, id) as
      { state: string; embedder: string | null; vec: Buffer | null } | undefined;
    if (!r || r.state !== 'processed') return undefined;
    return {
      ...(r.embedder !== null ? { embedder: r.embedder } : {}),
      ...(r.vec?.byteLength ? { vector: Array.from(blobVector(r.vec)) } : {}),
    };
  }

  async listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }> {
    const errors = stmt(
      this.db,
      `SELECT item_id AS id, url, code, message, attempts, occurred_at AS occurredAt FROM processing_errors
           WHERE dataset_id = ? ORDER BY item_id LIMIT ? OFFSET ?`,
    ).all(datasetId, limit, offset) as ProcessingErrorRecord[];
    const total = (
      stmt(this.db, 'SELECT COUNT(*) AS n FROM processing_errors WHERE dataset_id = ?').get(
        datasetId,
      ) as { n: number }
    ).n;
    return { errors, total };
  }

  async sameImageGroups(datasetId: string): Promise<string[][]> {
    const rows = stmt(
      this.db,
      `SELECT id, image_pixel_hash AS hash FROM items
         WHERE dataset_id = ? AND state = 'processed' AND image_pixel_hash IN (
           SELECT image_pixel_hash FROM items
             WHERE dataset_id = ? AND state = 'processed' AND image_pixel_hash IS NOT NULL
             GROUP BY image_pixel_hash HAVING COUNT(*) > 1)
         ORDER BY image_pixel_hash, id`,
    ).all(datasetId, datasetId) as Array<{ id: string; hash: string }>;
    return groupRuns(rows);
  }

  async processedSince(
    datasetId: string,
    since: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<Array<{ id: string; processedAt: number }>> {
    const rows = stmt(
      this.db,
      `SELECT id, image_processed_at AS at FROM items
         WHERE dataset_id = ? AND state = 'processed' AND id > ?
           AND (? IS NULL OR image_processed_at >= ?)
         ORDER BY id LIMIT ?`,
    ).all(datasetId, after ?? '', since ?? null, since ?? null, limit) as Array<{
      id: string;
      at: number | null;
    }>;
    return rows.map((r) => ({ id: r.id, processedAt: r.at ?? 0 }));
  }

  async vectorsPage(
    datasetId: string,
    embedder: string,
    field: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ items: LabelledVector[]; next?: string }> {
    // only items with a public value of the field: the vectors of the others are not read
    const rows = stmt(
      this.db,
      `SELECT i.id, i.metadata, i.image_pixel_hash AS hash, v.vec FROM items i
         JOIN item_vectors v ON v.item_pk = i.pk
         WHERE i.dataset_id = ? AND i.state = 'processed' AND i.id > ?
           AND v.embedder = ? AND length(v.vec) > 0
           AND EXISTS (SELECT 1 FROM item_values x WHERE x.item_pk = i.pk AND x.field = ?
                         AND x.scope = 'pub')
         ORDER BY i.id LIMIT ?`,
    ).all(datasetId, after ?? '', embedder, field, limit) as Array<{
      id: string;
      metadata: string;
      hash: string | null;
      vec: Buffer;
    }>;
    const items = rows.map((r) =>
      labelledVector(
        {
          id: r.id,
          metadata: JSON.parse(r.metadata) as Record<string, unknown>,
          pixelHash: r.hash,
        },
        blobVector(r.vec),
        field,
      ),
    );
    return rows.length < limit ? { items } : { items, next: rows.at(-1)!.id };
  }

  async ping(): Promise<void> {
    stmt(this.db, 'SELECT 1').get();
  }
}
