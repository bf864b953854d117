import { kindOf, type Metadata, type ValueKind } from '../domain/metadata';
import { textTerms } from '../query/text';

export type Scope = 'pub' | 'priv' | 'gen';

/**
 * The scopes the Vision API may read: q, sort and facets see only these, so a privateMetadata
 * key behaves like a field no item has (contract §6) and a key present in both metadata and
 * privateMetadata is its public value alone.
 */
export const QUERYABLE_SCOPES: readonly Scope[] = ['pub', 'gen'];

export interface ValueRow {
  field: string;
  scope: Scope;
  isArray: 0 | 1;
  vtype: 's' | 'n' | 'b';
  sval: string | null;
  nval: number | null;
}

function scalarRow(
  field: string,
  scope: Scope,
  isArray: 0 | 1,
  v: string | number | boolean,
): ValueRow {
  if (typeof v === 'number') return { field, scope, isArray, vtype: 'n', sval: null, nval: v };
  if (typeof v === 'boolean')
    return { field, scope, isArray, vtype: 'b', sval: String(v), nval: null };
  return { field, scope, isArray, vtype: 's', sval: v, nval: null };
}

/** Flattens metadata into one row per value; array elements become rows of their own. */
export function valueRows(metadata: Metadata, scope: Scope): ValueRow[] {
  const rows: ValueRow[] = [];
  for (const [field, v] of Object.entries(metadata)) {
    if (Array.isArray(v))
      for (const e of new Set<string | number>(v)) rows.push(scalarRow(field, scope, 1, e));
    else rows.push(scalarRow(field, scope, 0, v));
  }
  return rows;
}

export function kindEntries(metadata: Metadata, scope: Scope): Array<[string, Scope, ValueKind]> {
  return Object.entries(metadata).map(([f, v]) => [f, scope, kindOf(v)]);
}

/** Words of all public string metadata (arrays included), for `text:` search. */
export function itemTerms(metadata: Metadata): string[] {
  const terms = new Set<string>();
  for (const v of Object.values(metadata)) {
    const strings =
      typeof v === 'string'
        ? [v]
        : Array.isArray(v)
          ? v.filter((e): e is string => typeof e === 'string')
          : [];
    for (const s of strings) for (const t of textTerms(s)) terms.add(t);
  }
  return [...terms];
}
