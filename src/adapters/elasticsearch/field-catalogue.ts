import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../../domain/limits';
import type { ValueKind } from '../../domain/metadata';
import type { FieldCatalogue } from '../../query/resolve';
import { catalogueBody } from './dsl';
import { RecentReads } from '../../lib/recent-reads';
import type { EsIndices } from './indices';
import { ItemIndex, orEmpty } from './item-index';

/**
 * Within the 2 s consistency window of contract §12: another host's writes show here at the
 * latest 2 s later. The memo belongs to this instance and this host's writes clear it at once.
 */
const CATALOGUE_TTL_MS = 2000;

type Bucket = {
  key: string | number;
  key_as_string?: string;
  t?: { buckets: Bucket[] };
  arr?: { buckets: Bucket[] };
};

/** The metadata fields of a dataset and the kinds of value each holds, from the value index. */
export class FieldCatalogues extends ItemIndex {
  /** The public catalogue of each dataset (every value kept, an empty one too). */
  private readonly recent: RecentReads<Map<string, Set<ValueKind>>>;

  constructor(indices: EsIndices, now: () => number) {
    super(indices);
    this.recent = new RecentReads(CATALOGUE_TTL_MS, now, () => true);
  }

  /** This host changed the dataset's items: its next catalogue read asks Elasticsearch. */
  invalidate(datasetId: string): void {
    this.recent.forget(datasetId);
  }

  /**
   * Public metadata only: q and sort are resolved against it, so a privateMetadata key cannot
   * make a field an array field (a 400) or sortable (contract §6: it is a field no item has).
   */
  async catalogue(datasetId: string): Promise<FieldCatalogue> {
    return (await this.recent.get(datasetId, () => this.kinds(datasetId)))!;
  }

  async publicFields(datasetId: string): Promise<string[]> {
    const names = (await this.fields(datasetId, ['pub'])).map((b) => String(b.key)).sort();
    return [...names, ...GENERATED_FIELDS, ...SERVICE_TIME_FIELDS];
  }

  private async kinds(datasetId: string): Promise<Map<string, Set<ValueKind>>> {
    const value = new Map<string, Set<ValueKind>>();
    for (const f of await this.fields(datasetId, ['pub'])) {
      const set = new Set<ValueKind>();
      for (const t of f.t!.buckets) {
        for (const a of t.arr!.buckets) {
          const arr = a.key_as_string === 'true' || a.key === 1;
          const base = t.key === 'n' ? 'number' : t.key === 'b' ? 'boolean' : 'string';
          set.add((arr ? `${base}[]` : base) as ValueKind);
        }
      }
      value.set(String(f.key), set);
    }
    return value;
  }

  /** One bucket per field of `scopes`; none when the dataset has no index. */
  private fields(datasetId: string, scopes: string[]): Promise<Bucket[]> {
    return orEmpty(async () => {
      const r = await this.client.search({
        index: this.index(datasetId),
        ...catalogueBody(scopes),
      });
      return (r.aggregations as { a: { sel: { fields: { buckets: Bucket[] } } } }).a.sel.fields
        .buckets;
    }, []);
  }
}
