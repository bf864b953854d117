import type { Dataset } from '../domain/dataset';
import { deserialise, type Projection } from '../domain/tuning/lda';
import { RecentReads } from '../lib/recent-reads';
import type { AccountStore } from '../ports/account-store';
import type { ActiveProjection, TunedQuery } from '../ports/search-engine';
import type { TuningStore } from '../ports/tuning-store';

/** How old a dataset record a worker may write projections by (contract §12's 1 s). */
const DATASET_TTL_MS = 1000;

/** Projections kept per process; an id is never reused, so a kept one is never stale. */
const KEPT = 16;

/**
 * The tuned ranking a dataset's similarity requests use (contract §20): its active stored
 * projection and weight, or none. The setting comes with the dataset record, so switching off
 * (or a new fit) applies as soon as the record is read; the projection bytes are read once.
 */
export class TunedModels {
  private readonly kept = new Map<string, Promise<Projection | undefined>>();

  constructor(private readonly store: Pick<TuningStore, 'getModel'>) {}

  async of(ds: Dataset): Promise<TunedQuery | undefined> {
    const s = ds.similarity;
    // a projection learned from another embedder's vectors means nothing for these
    if (s?.state !== 'active' || !s.model || s.embedder !== ds.embedder?.id) return undefined;
    const projection = await this.projection(ds.id, s.model);
    return projection && { model: s.model, projection, weight: s.weight };
  }

  private projection(datasetId: string, model: string): Promise<Projection | undefined> {
    const had = this.kept.get(model);
    if (had) {
      this.kept.delete(model);
      this.kept.set(model, had);
      return had;
    }
    const read = this.store.getModel(datasetId, model).then((b) => b && deserialise(b));
    // a failed read is not kept: the next request reads again
    read.catch(() => this.kept.delete(model));
    this.kept.set(model, read);
    while (this.kept.size > KEPT) this.kept.delete(this.kept.keys().next().value!);
    return read;
  }
}

/**
 * The active projection of a dataset by id, for workers that store it with each processed item:
 * the record as this process read it in the last DATASET_TTL_MS. An item written under a
 * projection replaced meanwhile is rewritten by the tuning pass.
 */
export function activeProjections(
  accounts: Pick<AccountStore, 'getDatasetById'>,
  models: TunedModels,
  now: () => number,
): (datasetId: string) => Promise<ActiveProjection | undefined> {
  const recent = new RecentReads<Dataset>(DATASET_TTL_MS, now);
  return async (datasetId) => {
    const ds = await recent.get(datasetId, () => accounts.getDatasetById(datasetId));
    return ds && models.of(ds);
  };
}
