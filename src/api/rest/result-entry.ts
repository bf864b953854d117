import type { StoredItem } from '../../domain/item';
import type { Scalar } from '../../domain/metadata';
import { projectMetadata, type FieldSelection } from '../fields';
import { exploreUrl, type Carry } from '../links';

/** A result entry as the interface writes it (snake_case, `score` only for similarity). */
export interface ResultEntry {
  id: string;
  explore_url: string;
  metadata: Record<string, unknown>;
  score?: number;
  group?: { value: Scalar | null; count: number; items?: ResultEntry[] };
}

export function resultEntry(
  item: StoredItem,
  sel: FieldSelection,
  link: { baseUrl: string; org: string; dataset: string; carry: Carry },
  score?: number,
): ResultEntry {
  return {
    id: item.id,
    explore_url: exploreUrl(link.baseUrl, link.org, link.dataset, item.id, link.carry),
    metadata: projectMetadata(item, sel),
    ...(score !== undefined ? { score } : {}),
  };
}

/** The entry of a group's best item with its `group` (further items only when size > 1). */
export function groupedEntry(
  first: ResultEntry,
  g: { value: Scalar | null; count: number },
  more: ResultEntry[],
  size: number,
): ResultEntry {
  return {
    ...first,
    group: { value: g.value, count: g.count, ...(size > 1 ? { items: more } : {}) },
  };
}
