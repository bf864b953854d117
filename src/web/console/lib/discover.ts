import { ApiError, type VisionApi } from '../api';
import { niceInterval, SERVICE_FIELDS } from './q';
import { GROUP_FIELD } from './variants';

/** What the sidebar and the sort menu offer, learned from the dataset itself. */
export interface Discovery {
  /** Fields listed as values to pick (strings, booleans; not ids or titles). */
  facetFields: string[];
  /** Numeric fields → histogram interval. */
  numeric: Record<string, number>;
  /** Fields holding text (not only true/false): what a tile may be titled by. */
  stringFields: string[];
  /** The field variants share (`parent`) when items have it: the catalogue groups by it. */
  groupField?: string;
}

const MAX_CANDIDATES = 20;
const NAME_LIKE = /(^|_)(name|title)$/i;

/**
 * The field names come from `content/fields?fields=*` (free); one figures-only search with facets
 * and stats for each of them tells numbers (stats count > 0) from values worth listing (some
 * value shared by several items). Array fields not enabled for querying are refused with a 400
 * naming them; they are left out and the request repeated. A dataset below 200 processed items
 * throws `dataset_not_ready`.
 */
export async function discover(vision: VisionApi): Promise<Discovery> {
  const names = await vision.fieldNames();
  const groupField = names.includes(GROUP_FIELD) ? GROUP_FIELD : undefined;
  // Name-like fields first, so a dataset with many fields still offers them as titles. The group
  // field is a product id: grouping shows it, a list of its values would not help in the sidebar.
  let candidates = names
    .filter((f) => !SERVICE_FIELDS.has(f) && f !== GROUP_FIELD)
    .sort((a, b) => Number(NAME_LIKE.test(b)) - Number(NAME_LIKE.test(a)))
    .slice(0, MAX_CANDIDATES);
  for (let attempt = 0; attempt < 8; attempt++) {
    try {
      const r = await vision.figures(candidates);
      const numeric: Record<string, number> = {};
      const facetFields: string[] = [];
      const stringFields: string[] = [];
      for (const f of candidates) {
        const s = r.stats[f];
        if (s && s.count > 0 && s.min !== null && s.max !== null) {
          numeric[f] = niceInterval(s.min, s.max);
          continue;
        }
        const buckets = r.facets[f]?.buckets ?? [];
        if (buckets.some((b) => b.value !== 'true' && b.value !== 'false')) stringFields.push(f);
        if (buckets.some((b) => b.count > 1) || (buckets.length > 0 && !r.facets[f]?.other))
          facetFields.push(f);
      }
      return { facetFields, numeric, stringFields, groupField };
    } catch (e) {
      const refused =
        e instanceof ApiError && e.status === 400
          ? e.details.map((d) => d.field).filter((f): f is string => !!f)
          : [];
      if (!refused.some((f) => candidates.includes(f))) throw e;
      candidates = candidates.filter((f) => !refused.includes(f));
    }
  }
  return { facetFields: [], numeric: {}, stringFields: [], groupField };
}
