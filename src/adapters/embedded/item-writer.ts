import type { ContentWrite, WriteMode } from '../../domain/content';
import { applyWrite } from '../../domain/content-write';
import type { ProcessingJob } from '../../domain/item';
import type { Metadata } from '../../domain/metadata';
import { NO_COUNTS, countFields, type ItemCounts } from '../../domain/popularity';
import type { ItemWriter } from '../../ports/item-writer';
import { itemTerms, kindEntries, valueRows, type Scope } from '../value-index';
import { ChangeLog } from './change-log';
import { type Db, stmt } from './db';
import { itemStatements, toStoredItem, type ItemRow } from './item-row';

/**
 * ItemWriter on the embedded SQLite file: each call is one transaction, all or none. An item's
 * metadata is indexed as value rows, terms and field kinds, and every change is stamped in the
 * change log the in-memory search index catches up from.
 */
export class EmbeddedItemWriter implements ItemWriter {
  private readonly st;
  private readonly changes: ChangeLog;

  constructor(private readonly db: Db) {
    this.changes = new ChangeLog(db);
    this.st = {
      ...itemStatements(db),
      byId: db.prepare('SELECT * FROM items WHERE dataset_id = ? AND id = ?'),
      insert: db.prepare(
        `INSERT INTO items (dataset_id, id, url, metadata, private_metadata, state, created_at,
           updated_at, popularity, purchases)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?) RETURNING pk`,
      ),
      // an id's counts from events logged before the item was pushed (or while it was deleted)
      countsOf: db.prepare(
        'SELECT popularity, purchases FROM item_counts WHERE dataset_id = ? AND item_id = ?',
      ),
      update: db.prepare(
        `UPDATE items SET url = ?, metadata = ?, private_metadata = ?, state = ?, updated_at = ?,
           image_width = CASE WHEN ? THEN NULL ELSE image_width END,
           image_height = CASE WHEN ? THEN NULL ELSE image_height END,
           image_url = CASE WHEN ? THEN NULL ELSE image_url END,
           image_processed_at = CASE WHEN ? THEN NULL ELSE image_processed_at END,
           image_pixel_hash = CASE WHEN ? THEN NULL ELSE image_pixel_hash END,
           image_copy_signature = CASE WHEN ? THEN NULL ELSE image_copy_signature END
         WHERE pk = ?`,
      ),
      insTerm: db.prepare('INSERT INTO item_terms (item_pk, dataset_id, term) VALUES (?, ?, ?)'),
      delTerms: db.prepare('DELETE FROM item_terms WHERE item_pk = ?'),
      kindAdd: db.prepare(
        `INSERT INTO field_kinds (dataset_id, field, scope, kind, n) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (dataset_id, field, scope, kind) DO UPDATE SET n = n + excluded.n`,
      ),
      kindPrune: db.prepare('DELETE FROM field_kinds WHERE dataset_id = ? AND n <= 0'),
      delItem: db.prepare('DELETE FROM items WHERE pk = ?'),
      delVector: db.prepare('DELETE FROM item_vectors WHERE item_pk = ?'),
    };
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
          const counts =
            (this.st.countsOf.get(datasetId, item.id) as ItemCounts | undefined) ?? NO_COUNTS;
          const { pk } = this.st.insert.get(
            datasetId,
            item.id,
            item.url,
            JSON.stringify(item.metadata),
            JSON.stringify(item.privateMetadata),
            now,
            now,
            counts.popularity,
            counts.purchases,
          ) as { pk: number };
          touched.push(pk);
          this.indexMetadata(pk, datasetId, item.metadata, item.privateMetadata);
          for (const r of valueRows(countFields(counts), 'gen'))
            this.st.insValue.run(
              pk,
              datasetId,
              r.field,
              r.scope,
              r.isArray,
              r.vtype,
              r.sval,
              r.nval,
            );
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
            clear,
            clear,
            row.pk,
          );
          if (out.urlChanged) {
            this.st.delError.run(datasetId, w.id);
            this.st.delImageValues.run(row.pk);
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
        'item_counts',
        'items',
      ])
        stmt(this.db, `DELETE FROM ${t} WHERE dataset_id = ?`).run(datasetId);
      this.changes.dropped(datasetId);
    })();
  }
}
