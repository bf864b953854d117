import type { Dataset } from '../domain/dataset';
import { deserialise, type Projection } from '../domain/tuning/lda';
import type { TunedQuery } from '../ports/search-engine';
import type { TuningStore } from '../ports/tuning-store';

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
