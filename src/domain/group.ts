/**
 * Results grouped by a field (contract §13): one entry per distinct value, the group's best item
 * first. The rules both engines and the similarity service share live here, so a group is the
 * same group everywhere.
 */
import { invalid } from './errors';
import type { StoredItem } from './item';
import { GENERATED_FIELDS, LIMITS, isServiceTimeField } from './limits';
import type { Scalar } from './metadata';

/** `group=<field>` and `group_size=N` as a request carries them. */
export interface GroupSpec {
  field: string;
  /** 1–10: the best item and up to size − 1 more of its group. */
  size: number;
}

/** One group of a page: `items[0]` is its best item, then up to size − 1 more, in order. */
export interface ItemGroup<T = StoredItem> {
  /** The field's value; null for an item without it or with an array (a group of its own). */
  value: Scalar | null;
  /** Items of the group that match the request's filter, across the dataset. */
  count: number;
  items: T[];
}

/** A page of groups with the totals of contract §13. */
export interface GroupedPage {
  groups: ItemGroup[];
  /** Matching items. */
  total: number;
  /** Matching groups (an item without a scalar value is a group of its own). */
  totalGroups: number;
  totalGroupsExact: boolean;
}

/**
 * Which group a value belongs to: numbers by value, strings and booleans by their text (as
 * facets count them). Undefined for a missing or array value: the item is a group of its own.
 */
export function groupKey(v: unknown): string | undefined {
  if (typeof v === 'number') return `n:${v}`;
  if (typeof v === 'string' || typeof v === 'boolean') return `t:${String(v)}`;
  return undefined;
}

/** The value of a grouping field on an item as the Vision API shows it (metadata or generated). */
export function groupValue(item: StoredItem, field: string): Scalar | undefined {
  switch (field) {
    case 'image_width':
      return item.image?.width;
    case 'image_height':
      return item.image?.height;
    case 'image_url':
      return item.image?.url;
  }
  const v = Object.hasOwn(item.metadata, field) ? item.metadata[field] : undefined;
  return Array.isArray(v) ? undefined : v;
}

/** The rules of `group` and `group_size`, however they were written; errors name the REST parameter. */
export function checkGroup(
  field: string | undefined,
  size: number | undefined,
): GroupSpec | undefined {
  if (field === undefined || field === '') {
    if (size !== undefined)
      throw invalid('group_size needs group=<field>', [
        { param: 'group_size', message: 'only with group' },
      ]);
    return undefined;
  }
  if (isServiceTimeField(field))
    throw invalid(`group: '${field}' is a time; group by a metadata field`, [
      { param: 'group', message: 'a metadata or generated field' },
    ]);
  const n = size ?? 1;
  if (!Number.isInteger(n) || n < 1 || n > LIMITS.groupSizeMax)
    throw invalid(`group_size: must be an integer from 1 to ${LIMITS.groupSizeMax}`, [
      { param: 'group_size', message: `1 to ${LIMITS.groupSizeMax}` },
    ]);
  return { field, size: n };
}

/** Fields a group may name without any item holding them (the generated ones). */
export const isGeneratedField = (f: string): boolean =>
  (GENERATED_FIELDS as readonly string[]).includes(f);

/**
 * Groups of already ordered hits: each new key opens a group (its first hit is the best), later
 * hits of an open group join it up to `size`; a hit without a key is a group of its own. Stops
 * once `want` groups are open (their later hits in `hits` still join them).
 */
export function groupHits<T>(
  hits: readonly T[],
  keyOf: (h: T) => string | undefined,
  size: number,
  want: number,
): Array<{ key: string | undefined; hits: T[] }> {
  const out: Array<{ key: string | undefined; hits: T[] }> = [];
  const open = new Map<string, T[]>();
  for (const h of hits) {
    const k = keyOf(h);
    if (k === undefined) {
      if (out.length < want) out.push({ key: undefined, hits: [h] });
      continue;
    }
    const g = open.get(k);
    if (g) {
      if (g.length < size) g.push(h);
      continue;
    }
    if (out.length >= want) continue;
    const list = [h];
    open.set(k, list);
    out.push({ key: k, hits: list });
  }
  return out;
}
