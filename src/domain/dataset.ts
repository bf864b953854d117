import { invalid, type ErrorDetail } from './errors';
import { LIMITS } from './limits';
import type { SimilaritySettings } from './tuning/settings';

/** Array field → values enabled for querying; `['*']` enables every value. */
export type EnabledFields = Record<string, string[]>;

export interface DatasetSettings {
  fields: EnabledFields;
  version: number;
}

/** The embedder a dataset's vectors are made with: similarity compares vectors of one id only. */
export interface EmbedderRef {
  id: string;
  dimensions: number;
}

export interface Dataset {
  id: string;
  org: string;
  name: string;
  settings: DatasetSettings;
  createdAt: string;
  /**
   * Times the browse token was rotated: the browse token and the scoped-token key are derived
   * from it (contract §16), so a request must see its current value.
   */
  browseRotation: number;
  /** Absent for datasets created before embeddings existed, until a worker adopts one. */
  embedder?: EmbedderRef;
  /** Tuned similarity (contract §20); absent until first set. */
  similarity?: SimilaritySettings;
}

export interface DatasetCounts {
  items: number;
  processed: number;
  pending: number;
  errors: number;
}

export type DatasetStatus = 'pending' | 'published';

/** `published` exactly while enough items are processed for the Vision API (contract §3). */
export const statusOf = (c: DatasetCounts): DatasetStatus =>
  c.processed >= LIMITS.minProcessedForVision ? 'published' : 'pending';

/** `*` counts as one value toward the per-dataset limit. */
const indexedValueCount = (fields: EnabledFields): number =>
  Object.values(fields).reduce((n, vs) => n + vs.length, 0);

/**
 * Validates a settings/fields body. Values may be given as strings or numbers (number arrays
 * are allowed in metadata); they are kept as strings, which is how `q` values arrive.
 */
/** The array fields (and values) a client asks to enable for q, checked whole. */
export function parseEnabledFields(
  fields: Readonly<Record<string, ReadonlyArray<string | number>>>,
): EnabledFields {
  const out: EnabledFields = {};
  const details: ErrorDetail[] = [];
  for (const [name, values] of Object.entries(fields)) {
    const at = `fields.${name}`;
    if (name.length === 0 || name.length > LIMITS.metadataKeyMaxLength) {
      details.push({
        field: at,
        message: `field name must be 1–${LIMITS.metadataKeyMaxLength} characters`,
      });
      continue;
    }
    if (values.length === 0) {
      details.push({ field: at, message: 'expected a non-empty array of values, or ["*"]' });
      continue;
    }
    const bad = values.findIndex(
      (v) => !(typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))),
    );
    if (bad >= 0) {
      details.push({ field: `${at}[${bad}]`, message: 'values must be strings or numbers' });
      continue;
    }
    const strings = [...new Set(values.map(String))];
    if (strings.includes('*') && strings.length > 1) {
      details.push({ field: at, message: '"*" enables every value and must be the only entry' });
      continue;
    }
    out[name] = strings;
  }
  if (details.length) throw invalid('settings.fields is invalid', details);
  const count = indexedValueCount(out);
  if (count > LIMITS.indexedArrayValues) {
    throw invalid(
      `${count} indexed values requested; at most ${LIMITS.indexedArrayValues} across all fields per dataset ("*" counts as one)`,
      [
        {
          field: 'fields',
          message: `${count} values exceed the limit of ${LIMITS.indexedArrayValues}`,
        },
      ],
    );
  }
  return out;
}

export function sameFields(a: EnabledFields, b: EnabledFields): boolean {
  const norm = (f: EnabledFields): string =>
    JSON.stringify(
      Object.keys(f)
        .sort()
        .map((k) => [k, [...f[k]].sort()]),
    );
  return norm(a) === norm(b);
}
