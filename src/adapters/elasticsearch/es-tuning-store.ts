import type { TuningStore } from '../../ports/tuning-store';
import { claimLease, createOnly, getVersioned } from './cas';
import type { EsIndices } from './indices';
import { orEmpty } from './item-index';

/**
 * Tuned-similarity projections on Elasticsearch (one shared index, `kind` model or lease): a
 * projection is written create-only under a new id and never changed, the lease with if_seq_no.
 */
interface Doc {
  kind: 'model' | 'lease';
  dataset_id?: string;
  bytes?: string;
  created_at?: number;
  owner?: string;
  claim_until?: number;
}

const modelId = (ds: string, id: string): string => `m\u0000${ds}\u0000${id}`;
/** A dataset's projections at most at once: the active one and a refit's, and strays. */
const MAX_MODELS = 1000;

export class EsTuningStore implements TuningStore {
  constructor(private readonly indices: EsIndices) {}

  private get index(): string {
    return this.indices.shared('tuning');
  }

  async putModel(datasetId: string, id: string, bytes: Uint8Array): Promise<void> {
    const doc: Doc = {
      kind: 'model',
      dataset_id: datasetId,
      bytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'),
      created_at: Date.now(),
    };
    if (!(await createOnly(this.indices.client, this.index, modelId(datasetId, id), doc)))
      throw new Error(`tuning model ${id} exists already`);
  }

  async getModel(datasetId: string, id: string): Promise<Uint8Array | undefined> {
    const r = await getVersioned<Doc>(this.indices.client, this.index, modelId(datasetId, id));
    return r?.doc.bytes === undefined
      ? undefined
      : new Uint8Array(Buffer.from(r.doc.bytes, 'base64'));
  }

  /** Searched and deleted by id: the distribution has no delete-by-query (no reindex module). */
  async pruneModels(datasetId: string, keep: readonly string[]): Promise<void> {
    const kept = new Set(keep.map((id) => modelId(datasetId, id)));
    const r = await orEmpty(async () => {
      // a projection written a moment ago must be seen to be deleted (a rare, small read)
      await this.indices.client.indices.refresh({ index: this.index });
      return this.indices.client.search({
        index: this.index,
        query: {
          bool: { filter: [{ term: { kind: 'model' } }, { term: { dataset_id: datasetId } }] },
        },
        size: MAX_MODELS,
        _source: false,
      });
    }, undefined);
    const gone = (r?.hits.hits ?? []).map((h) => h._id!).filter((id) => !kept.has(id));
    if (gone.length)
      await this.indices.client.bulk({
        operations: gone.map((id) => ({ delete: { _index: this.index, _id: id } })),
      });
  }

  claim(owner: string, now: number, until: number): Promise<boolean> {
    return claimLease(
      this.indices.client,
      this.index,
      'lease',
      { owner, now, until },
      { what: 'the tuning lease' },
    );
  }
}
