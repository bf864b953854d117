import type { ProcessingJob } from '../../domain/item';
import type { ImageFeatures, ProcessingFailure } from '../../domain/processing';
import type { ItemProcessing, JobPage } from '../../ports/item-processing';
import { valueRows } from '../value-index';
import { ChangeLog } from './change-log';
import { type Db, stmt } from './db';
import { itemStatements, jobPage, type JobRow } from './item-row';
import { vectorBlob } from './vectors';

/**
 * ItemProcessing on the embedded SQLite file: a worker's result is one transaction that checks
 * the item still has the job's url, so a job for an old url never overwrites a newer one.
 */
export class EmbeddedItemProcessing implements ItemProcessing {
  private readonly st;
  private readonly changes: ChangeLog;

  constructor(private readonly db: Db) {
    this.changes = new ChangeLog(db);
    this.st = itemStatements(db);
  }

  async markProcessed(job: ProcessingJob, f: ImageFeatures, now: number): Promise<boolean> {
    return this.db.transaction(() => {
      const row = stmt(
        this.db,
        `UPDATE items SET state = 'processed', image_width = ?, image_height = ?, image_url = url,
             image_processed_at = ?, image_pixel_hash = ?, image_copy_signature = ?
             WHERE dataset_id = ? AND id = ? AND url = ? AND state != 'processed' RETURNING pk`,
      ).get(
        f.width,
        f.height,
        now,
        f.pixelHash ?? null,
        f.copySignature ?? null,
        job.datasetId,
        job.itemId,
        job.url,
      ) as { pk: number } | undefined;
      if (!row) return false;
      this.changes.stamp(job.datasetId, [row.pk], false);
      this.st.delError.run(job.datasetId, job.itemId);
      this.st.delImageValues.run(row.pk);
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

  async markEmbedded(
    job: ProcessingJob,
    embedding: { vector: number[]; embedder: string; pixelHash?: string; copySignature?: string },
  ): Promise<boolean> {
    return this.db.transaction(() => {
      const row = stmt(
        this.db,
        `SELECT pk FROM items WHERE dataset_id = ? AND id = ? AND url = ? AND state = 'processed'`,
      ).get(job.datasetId, job.itemId, job.url) as { pk: number } | undefined;
      if (!row) return false;
      // the hash names the decode for the embedder: a new embedder's decode gets its own
      if (embedding.pixelHash)
        stmt(
          this.db,
          'UPDATE items SET image_pixel_hash = ?, image_copy_signature = ? WHERE pk = ?',
        ).run(embedding.pixelHash, embedding.copySignature ?? null, row.pk);
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
  ): Promise<JobPage> {
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

  async pendingJobs(cursor: string | undefined, limit: number): Promise<JobPage> {
    return jobPage(
      stmt(
        this.db,
        `SELECT pk, dataset_id, id, url FROM items WHERE state = 'pending' AND pk > ? ORDER BY pk LIMIT ?`,
      ).all(Number(cursor ?? 0), limit) as JobRow[],
      limit,
    );
  }
}
