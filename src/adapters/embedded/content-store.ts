import type { ContentWrite, WriteMode } from '../../domain/content';
import type { DatasetCounts } from '../../domain/dataset';
import type {
  ListEntry,
  ProcessingErrorRecord,
  ProcessingJob,
  StoredItem,
} from '../../domain/item';
import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../../domain/limits';
import { applyWrite } from '../../domain/content-write';
import type { Metadata, ValueKind } from '../../domain/metadata';
import type { ImageFeatures, ProcessingFailure } from '../../domain/processing';
import type { ContentStore, StoredEmbedding } from '../../ports/content-store';
import type { FieldCatalogue } from '../../query/resolve';
import { blobVector, vectorBlob } from './vectors';
import { type Db, stmt } from './db';
import { ChangeLog } from './change-log';
import { count } from './bitset';
import { MemoryIndexes } from './index-sync';
import { itemTerms, kindEntries, valueRows, type Scope } from '../value-index';

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
  created_at: number;
  updated_at: number;
}

export const toStoredItem = (r: ItemRow): StoredItem => ({
  id: r.id,
  url: r.url,
  metadata: JSON.parse(r.metadata) as Metadata,
  privateMetadata: JSON.parse(r.private_metadata) as Metadata,
  state: r.state,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  ...(r.state === 'processed' && r.image_width !== null
    ? {
        image: {
          width: r.image_width,
          height: r.image_height ?? 0,
          url: r.image_url ?? r.url,
          ...(r.image_processed_at !== null ? { processedAt: r.image_processed_at } : {}),
        },
      }
    : {}),
});

interface JobRow {
  pk: number;
  dataset_id: string;
  id: string;
  url: string;
}

/** Rows in pk order as jobs; a full page carries the cursor for the next one. */
const jobPage = (rows: JobRow[], limit: number): { jobs: ProcessingJob[]; next?: string } => ({
  jobs: rows.map((r) => ({ datasetId: r.dataset_id, itemId: r.id, url: r.url, attempt: 1 })),
  ...(rows.length === limit ? { next: String(rows[rows.length - 1]!.pk) } : {}),
});

const chunks = <T>(xs: T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

export class EmbeddedContentStore implements ContentStore {
  private readonly st;
  private readonly changes: ChangeLog;

  constructor(private readonly db: Db) {
    this.changes = new ChangeLog(db);
    this.st = {
      byId: db.prepare('SELECT * FROM items WHERE dataset_id = ? AND id = ?'),
      insert: db.prepare(
        `INSERT INTO items (dataset_id, id, url, metadata, private_metadata, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING pk`,
      ),
      update: db.prepare(
        `UPDATE items SET url = ?, metadata = ?, private_metadata = ?, state = ?, updated_at = ?,
           image_width = CASE WHEN ? THEN NULL ELSE image_width END,
           image_height = CASE WHEN ? THEN NULL ELSE image_height END,
           image_url = CASE WHEN ? THEN NULL ELSE image_url END,
           image_processed_at = CASE WHEN ? THEN NULL ELSE image_processed_at END
         WHERE pk = ?`,
      ),
      insValue: db.prepare(
        'INSERT INTO item_values (item_pk, dataset_id, field, scope, is_array, vtype, sval, nval) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      delValues: db.prepare('DELETE FROM item_values WHERE item_pk = ? AND scope IN (?, ?)'),
      insTerm: db.prepare('INSERT INTO item_terms (item_pk, dataset_id, term) VALUES (?, ?, ?)'),
      delTerms: db.prepare('DELETE FROM item_terms WHERE item_pk = ?'),
      kindAdd: db.prepare(
        `INSERT INTO field_kinds (dataset_id, field, scope, kind, n) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (dataset_id, field, scope, kind) DO UPDATE SET n = n + excluded.n`,
      ),
      kindPrune: db.prepare('DELETE FROM field_kinds WHERE dataset_id = ? AND n <= 0'),
      delError: db.prepare('DELETE FROM processing_errors WHERE dataset_id = ? AND item_id = ?'),
      delItem: db.prepare('DELETE FROM items WHERE pk = ?'),
      delVector: db.prepare('DELETE FROM item_vectors WHERE item_pk = ?'),
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

  private adjustKinds(datasetId: string, md: Metadata, scope: Scope, delta: 1 | -1): void {
    for (const [field, s, kind] of kindEntries(md, scope))
      this.st.kindAdd.run(datasetId, field, s, kind, delta);
  }

  private indexMetadata(pk: number, datasetId: string, md: Metadata, priv: Metadata): void {
    for (const [m, scope] of [
      [md, 'pub'],
      [priv, 'priv'],
    ] as const) {
      for (const r of valueRows(m, scope))
        this.st.insValue.run(pk, datasetId, r.field, r.scope, r.isArray, r.vtype, r.sval, r.nval);
      this.adjustKinds(datasetId, m, scope, 1);
    }
    for (const t of itemTerms(md)) this.st.insTerm.run(pk, datasetId, t);
  }

  private unindexMetadata(pk: number, datasetId: string, md: Metadata, priv: Metadata): void {
    this.st.delValues.run(pk, 'pub', 'priv');
    this.st.delTerms.run(pk);
    this.adjustKinds(datasetId, md, 'pub', -1);
    this.adjustKinds(datasetId, priv, 'priv', -1);
  }

  async applyWrites(
    datasetId: string,
    writes: ContentWrite[],
    mode: WriteMode,
    now: number,
  ): Promise<ProcessingJob[]> {
    return this.db.transaction(() => {
      const jobs = new Map<string, ProcessingJob>();
      const touched: number[] = [];
      for (const w of writes) {
        const row = this.st.byId.get(datasetId, w.id) as ItemRow | undefined;
        const old = row && toStoredItem(row);
        const out = applyWrite(old, w, mode, now);
        // PUT only touches existing items (checked by the service); a concurrent delete wins.
        if (!out) continue;
        const { item } = out;
        if (!row || !old) {
          const { pk } = this.st.insert.get(
            datasetId,
            item.id,
            item.url,
            JSON.stringify(item.metadata),
            JSON.stringify(item.privateMetadata),
            now,
            now,
          ) as { pk: number };
          touched.push(pk);
          this.indexMetadata(pk, datasetId, item.metadata, item.privateMetadata);
        } else {
          touched.push(row.pk);
          const clear = out.urlChanged ? 1 : 0;
          this.st.update.run(
            item.url,
            JSON.stringify(item.metadata),
            JSON.stringify(item.privateMetadata),
            item.state,
            now,
            clear,
            clear,
            clear,
            clear,
            row.pk,
          );
          if (out.urlChanged) {
            this.st.delError.run(datasetId, w.id);
            this.st.delValues.run(row.pk, 'gen', 'gen');
            if (this.st.delVector.run(row.pk).changes) this.st.bumpVectors.run(datasetId);
          }
          if (out.metadataChanged) {
            this.unindexMetadata(row.pk, datasetId, old.metadata, old.privateMetadata);
            this.indexMetadata(row.pk, datasetId, item.metadata, item.privateMetadata);
          }
        }
        if (out.needsJob) jobs.set(w.id, { datasetId, itemId: w.id, url: item.url, attempt: 1 });
        else jobs.delete(w.id);
      }
      this.st.kindPrune.run(datasetId);
      this.changes.stamp(datasetId, touched, false);
      return [...jobs.values()];
    })();
  }

  async deleteItems(datasetId: string, ids: string[]): Promise<number> {
    return this.db.transaction(() => {
      let n = 0;
      const gone: number[] = [];
      for (const id of ids) {
        const old = this.st.byId.get(datasetId, id) as ItemRow | undefined;
        if (!old) continue;
        this.unindexMetadata(
          old.pk,
          datasetId,
          JSON.parse(old.metadata),
          JSON.parse(old.private_metadata),
        );
        this.st.delValues.run(old.pk, 'gen', 'gen');
        if (this.st.delVector.run(old.pk).changes) this.st.bumpVectors.run(datasetId);
        this.st.delError.run(datasetId, id);
        this.st.delItem.run(old.pk);
        gone.push(old.pk);
        n++;
      }
      this.st.kindPrune.run(datasetId);
      this.changes.stamp(datasetId, gone, true);
      return n;
    })();
  }

  async dropDataset(datasetId: string): Promise<void> {
    this.db.transaction(() => {
      for (const t of [
        'item_values',
        'item_terms',
        'item_vectors',
        'vector_versions',
        'field_kinds',
        'processing_errors',
        'items',
      ])
        stmt(this.db, `DELETE FROM ${t} WHERE dataset_id = ?`).run(datasetId);
      this.changes.dropped(datasetId);
    })();
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

  async markProcessed(job: ProcessingJob, f: ImageFeatures, now: number): Promise<boolean> {
    return this.db.transaction(() => {
      const row = stmt(
        this.db,
        `UPDATE items SET state = 'processed', image_width = ?, image_height = ?, image_url = url,
             image_processed_at = ?
             WHERE dataset_id = ? AND id = ? AND url = ? AND state != 'processed' RETURNING pk`,
      ).get(f.width, f.height, now, job.datasetId, job.itemId, job.url) as
        { pk: number } | undefined;
      if (!row) return false;
      this.changes.stamp(job.datasetId, [row.pk], false);
      this.st.delError.run(job.datasetId, job.itemId);
      this.st.delValues.run(row.pk, 'gen', 'gen');
      this.st.putVector.run(row.pk, job.datasetId, f.embedder, vectorBlob(f.vector));
      this.st.bumpVectors.run(job.datasetId);
      for (const r of valueRows(
        { image_width: f.width, image_height: f.height, image_url: job.url },
        'gen',
      ))
        this.st.insValue.run(
          row.pk,
          job.datasetId,
          r.field,
          r.scope,
          r.isArray,
          r.vtype,
          r.sval,
          r.nval,
        );
      return true;
    })();
  }

  /** The item's processing error (one per item: the latest replaces any earlier one). */
  private putError(job: ProcessingJob, failure: ProcessingFailure, now: number): void {
    stmt(
      this.db,
      `INSERT OR REPLACE INTO processing_errors (dataset_id, item_id, url, code, message, attempts, occurred_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      job.datasetId,
      job.itemId,
      job.url,
      failure.code,
      failure.message,
      failure.attempts,
      new Date(now).toISOString(),
    );
  }

  async markFailed(job: ProcessingJob, failure: ProcessingFailure, now: number): Promise<boolean> {
    return this.db.transaction(() => {
      const row = stmt(
        this.db,
        `UPDATE items SET state = 'failed' WHERE dataset_id = ? AND id = ? AND url = ? AND state = 'pending'
           RETURNING pk`,
      ).get(job.datasetId, job.itemId, job.url) as { pk: number } | undefined;
      if (!row) return false;
      this.changes.stamp(job.datasetId, [row.pk], false);
      this.putError(job, failure, now);
      return true;
    })();
  }

  async markPostponed(
    job: ProcessingJob,
    failure: ProcessingFailure,
    now: number,
  ): Promise<boolean> {
    return this.db.transaction(() => {
      const pending = stmt(
        this.db,
        `SELECT 1 FROM items WHERE dataset_id = ? AND id = ? AND url = ? AND state = 'pending'`,
      ).get(job.datasetId, job.itemId, job.url);
      if (!pending) return false;
      this.putError(job, failure, now);
      return true;
    })();
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

  async markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string },
  ): Promise<boolean> {
    return this.db.transaction(() => {
      const row = stmt(
        this.db,
        `SELECT pk FROM items WHERE dataset_id = ? AND id = ? AND url = ? AND state = 'processed'`,
      ).get(job.datasetId, job.itemId, job.url) as { pk: number } | undefined;
      if (!row) return false;
      this.st.putVector.run(
        row.pk,
        job.datasetId,
        embedding.embedder,
        vectorBlob(embedding.vector),
      );
      this.st.bumpVectors.run(job.datasetId);
      return true;
    })();
  }

  async staleEmbeddings(
    embedder: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }> {
    return jobPage(
      stmt(
        this.db,
        `SELECT i.pk, i.dataset_id, i.id, i.url FROM items i
           LEFT JOIN item_vectors v ON v.item_pk = i.pk
           WHERE i.state = 'processed' AND i.pk > ? AND (v.embedder IS NULL OR v.embedder != ?)
           ORDER BY i.pk LIMIT ?`,
      ).all(Number(cursor ?? 0), embedder, limit) as JobRow[],
      limit,
    );
  }

  async staleEmbeddingCount(datasetId: string, embedder: string): Promise<number> {
    return (
      stmt(
        this.db,
        `SELECT COUNT(*) AS n FROM items i LEFT JOIN item_vectors v ON v.item_pk = i.pk
               WHERE i.dataset_id = ? AND i.state = 'processed'
                 AND (v.embedder IS NULL OR v.embedder != ?)`,
      ).get(datasetId, embedder) as { n: number }
    ).n;
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

  async pendingJobs(
    cursor: string | undefined,
    limit: number,
  ): Promise<{ jobs: ProcessingJob[]; next?: string }> {
    return jobPage(
      stmt(
        this.db,
        `SELECT pk, dataset_id, id, url FROM items WHERE state = 'pending' AND pk > ? ORDER BY pk LIMIT ?`,
      ).all(Number(cursor ?? 0), limit) as JobRow[],
      limit,
    );
  }

  async ping(): Promise<void> {
    stmt(this.db, 'SELECT 1').get();
  }
}
