import type { StoredItem } from '../../domain/item';
import { projectMetadata, type FieldSelection } from '../fields';
import { exploreUrl, type Carry } from '../links';

/** A result entry as the interface writes it (snake_case, `score` only for similarity). */
export interface ResultEntry {
  id: string;
  explore_url: string;
  metadata: Record<string, unknown>;
  score?: number;
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
