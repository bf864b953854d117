import type { DuplicateStore, NeighbourEntry, PassState } from '../../ports/duplicate-store';
import { dismissalKey } from '../dismissal-key';
import { claimLease, createOnly } from './cas';
import type { EsIndices } from './indices';
import { unavailable } from './outage';
import { Refresher } from './refresher';

interface Doc {
  kind: 'entry' | 'dismissal' | 'state' | 'lease';
  dataset_id?: string;
  item_id?: string;
  processed_at?: number;
  neighbours?: NeighbourEntry['neighbours'];
  ids?: string[];
  watermark?: number;
  computed_at?: number;
  embedder?: string;
  pass_started?: number;
  pass_after?: string;
  pass_embedder?: string;
  owner?: string;
  claim_until?: number;
}

/** Documents one page of a dataset's entries or dismissals reads. */
const PAGE = 5_000;
const ATTEMPTS = 8;

const entryId = (ds: string, item: string): string => `e\u0000${ds}\u0000${item}`;
const stateId = (ds: string): string => `s\u0000${ds}`;
const dismissalId = (ds: string, key: string): string => `d\u0000${ds}\u0000${key}`;

/**
 * The near-duplicate report's state on Elasticsearch (one shared index), the same on every
 * host. Entries are written by the pass lease's holder only, so plain writes serve them; the
 * lease itself is versioned and dismissals create-only. The index refreshes only when read.
 */
export class EsDuplicateStore implements DuplicateStore {
  private readonly refresher: Refresher;

  constructor(private readonly indices: EsIndices) {
    this.refresher = new Refresher(() => indices.client);
  }

  private get index(): string {
    return this.indices.shared('duplicates');
  }

  async putEntries(datasetId: string, entries: readonly NeighbourEntry[]): Promise<void> {
    if (!entries.length) return;
    const r = await this.indices.client.bulk({
      operations: entries.flatMap((e): object[] =>
        e.neighbours.length
          ? [
              { index: { _index: this.index, _id: entryId(datasetId, e.id) } },
              {
                kind: 'entry',
                dataset_id: datasetId,
                item_id: e.id,
                processed_at: e.processedAt,
                neighbours: e.neighbours,
              } satisfies Doc,
            ]
          : [{ delete: { _index: this.index, _id: entryId(datasetId, e.id) } }],
      ),
    });
    this.checkBulk(r.items, 'neighbour entries');
  }

  async entries(datasetId: string): Promise<NeighbourEntry[]> {
    const docs = await this.all(datasetId, 'entry', ['item_id', 'processed_at', 'neighbours']);
    return docs.map((d) => ({
      id: d.item_id!,
      processedAt: d.processed_at!,
      neighbours: d.neighbours ?? [],
    }));
  }

  async forget(datasetId: string, ids: readonly string[]): Promise<void> {
    if (!ids.length) return;
    const r = await this.indices.client.bulk({
      operations: ids.map((id) => ({
        delete: { _index: this.index, _id: entryId(datasetId, id) },
      })),
    });
    this.checkBulk(r.items, 'neighbour entries');
  }

  async clear(datasetId: string): Promise<void> {
    const ids = (await this.all(datasetId, 'entry', ['item_id'])).map((d) =>
      entryId(datasetId, d.item_id!),
    );
    await this.remove([...ids, stateId(datasetId)]);
  }

  async dropDataset(datasetId: string): Promise<void> {
    await this.clear(datasetId);
    const keys = await this.all(datasetId, 'dismissal', ['item_id']);
    await this.remove(keys.map((d) => dismissalId(datasetId, d.item_id!)));
  }

  /** Deletes documents by id (no delete-by-query: Elasticsearch may lack the reindex module). */
  private async remove(ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += PAGE) {
      const r = await this.indices.client.bulk({
        operations: ids
          .slice(i, i + PAGE)
          .map((id) => ({ delete: { _index: this.index, _id: id } })),
      });
      this.checkBulk(r.items, 'neighbour entries');
    }
  }

  async dismiss(datasetId: string, ids: readonly string[]): Promise<void> {
    const sorted = [...new Set(ids)].sort();
    const key = dismissalKey(sorted);
    // item_id holds the key, so dismissals page in one order like entries
    const doc: Doc = { kind: 'dismissal', dataset_id: datasetId, item_id: key, ids: sorted };
    // the same set dismissed twice is one record
    await createOnly(this.indices.client, this.index, dismissalId(datasetId, key), doc);
  }

  async dismissals(datasetId: string): Promise<string[][]> {
    return (await this.all(datasetId, 'dismissal', ['ids'])).map((d) => d.ids ?? []);
  }

  async state(datasetId: string): Promise<PassState> {
    const r = await this.indices.client.get<Doc>(
      { index: this.index, id: stateId(datasetId) },
      { ignore: [404] },
    );
    const d = r.found ? r._source : undefined;
    return {
      ...(d?.watermark !== undefined ? { watermark: d.watermark } : {}),
      ...(d?.computed_at !== undefined ? { computedAt: d.computed_at } : {}),
      ...(d?.embedder !== undefined ? { embedder: d.embedder } : {}),
      ...(d?.pass_started !== undefined && d.pass_after !== undefined && d.pass_embedder
        ? {
            progress: { started: d.pass_started, after: d.pass_after, embedder: d.pass_embedder },
          }
        : {}),
    };
  }

  async setState(datasetId: string, s: PassState): Promise<void> {
    await this.indices.client.index({
      index: this.index,
      id: stateId(datasetId),
      document: {
        kind: 'state',
        dataset_id: datasetId,
        ...(s.watermark !== undefined ? { watermark: s.watermark } : {}),
        ...(s.computedAt !== undefined ? { computed_at: s.computedAt } : {}),
        ...(s.embedder !== undefined ? { embedder: s.embedder } : {}),
        ...(s.progress
          ? {
              pass_started: s.progress.started,
              pass_after: s.progress.after,
              pass_embedder: s.progress.embedder,
            }
          : {}),
      } satisfies Doc,
    });
  }

  claim(owner: string, now: number, until: number): Promise<boolean> {
    return claimLease(
      this.indices.client,
      this.index,
      'lease',
      { owner, now, until },
      { what: 'the duplicate pass lease', attempts: ATTEMPTS },
    );
  }

  /** Every document of one kind of a dataset, after a refresh, in item_id order. */
  private async all(datasetId: string, kind: Doc['kind'], fields: string[]): Promise<Doc[]> {
    await this.refresher.visible(this.index);
    const out: Doc[] = [];
    let after: unknown[] | undefined;
    for (;;) {
      const r = await this.indices.client.search<Doc>({
        index: this.index,
        query: {
          bool: { filter: [{ term: { dataset_id: datasetId } }, { term: { kind } }] },
        },
        sort: [{ item_id: 'asc' }],
        size: PAGE,
        _source: fields,
        track_total_hits: false,
        ...(after ? { search_after: after as never } : {}),
      });
      const hits = r.hits.hits;
      out.push(...hits.map((h) => h._source!));
      if (hits.length < PAGE) return out;
      after = hits.at(-1)!.sort as unknown[];
    }
  }

  private checkBulk(
    items: Array<Record<string, { status: number; error?: unknown } | undefined>>,
    what: string,
  ): void {
    const failed = items
      .map((i) => i.index ?? i.delete)
      .find((o) => o?.error && !(o.status === 404));
    if (failed) throw unavailable(`${what} were not written (${failed.status}); try again`, 1);
  }
}
