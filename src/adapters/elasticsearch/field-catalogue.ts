import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../../domain/limits';
import type { ValueKind } from '../../domain/metadata';
import type { FieldCatalogue } from '../../query/resolve';
import { catalogueBody } from './dsl';
import { guard } from './guard';
import type { EsIndices } from './indices';
import { ItemIndex, orEmpty } from './item-index';

/**
 * Within the 2 s consistency window of contract §12: another host's writes show here at the
 * latest 2 s later. The cache belongs to this instance and this host's writes clear it at once.
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
  private readonly cache = new Map<
    string,
    { at: number; scopes: string; value: Map<string, Set<ValueKind>> }
  >();

  constructor(
    indices: EsIndices,
    private readonly now: () => number,
  ) {
    super(indices);
  }

  /** This host changed the dataset's items: its next catalogue read asks Elasticsearch. */
  invalidate(datasetId: string): void {
    this.cache.delete(datasetId);
  }

  /**
   * Public metadata only: q and sort are resolved against it, so a privateMetadata key cannot
   * make a field an array field (a 400) or sortable (contract §6: it is a field no item has).
   */
  catalogue(datasetId: string): Promise<FieldCatalogue> {
    return guard(() => this.kinds(datasetId, ['pub']));
  }

  publicFields(datasetId: string): Promise<string[]> {
    return guard(async () => {
      const names = (await this.fields(datasetId, ['pub'])).map((b) => String(b.key)).sort();
      return [...names, ...GENERATED_FIELDS, ...SERVICE_TIME_FIELDS];
    });
  }

  private async kinds(datasetId: string, scopes: string[]): Promise<Map<string, Set<ValueKind>>> {
    const key = scopes.join(',');
    const cached = this.cache.get(datasetId);
    if (cached && cached.scopes === key && this.now() - cached.at < CATALOGUE_TTL_MS)
      return cached.value;
    const value = new Map<string, Set<ValueKind>>();
    for (const f of await this.fields(datasetId, scopes)) {
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
    this.cache.set(datasetId, { at: this.now(), scopes: key, value });
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
