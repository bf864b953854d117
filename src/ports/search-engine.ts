import type { StoredItem } from '../domain/item';
import type { Condition } from '../query/ast';

export type SortOrder = 'asc' | 'desc';

export interface SearchRequest {
  conditions: Condition[];
  sort: { field: string; order: SortOrder };
  offset: number;
  limit: number;
}

/** Field → value (as a string) → number of matching processed items. */
export type Facets = Record<string, Record<string, number>>;

/** Queries over processed items. Engines refuse what they cannot do; they never approximate. */
export interface SearchEngine {
  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }>;
  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets>;
}
