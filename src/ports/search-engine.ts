import type { FiguresSpec, Figures } from '../domain/figures';
import type { StoredItem } from '../domain/item';
import type { Condition } from '../query/ast';

export type SortOrder = 'asc' | 'desc';

export interface SearchRequest {
  conditions: Condition[];
  sort: { field: string; order: SortOrder };
  offset: number;
  limit: number;
}

export interface SimilarRequest {
  /** L2-normalised query embedding. */
  vector: number[];
  /** Only vectors made by this embedder are compared. */
  embedder: string;
  conditions: Condition[];
  limit: number;
  excludeIds: string[];
  /** Return each hit's vector too (explore diversifies with them). */
  includeVectors?: boolean;
}

/** A similarity hit; `score` is 0–1 ((1 + cosine) / 2), higher is more similar. */
export interface ScoredItem {
  item: StoredItem;
  score: number;
  vector?: number[];
}

/** Field → value (as a string) → number of matching processed items. */
export type Facets = Record<string, Record<string, number>>;

/** Queries over processed items. Engines refuse what they cannot do; they never approximate. */
export interface SearchEngine {
  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }>;
  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets>;
  /**
   * Contract §10 figures over every processed item matching `conditions` (never a page):
   * facets (a disjunctive one without the conditions on its own field), stats, histograms.
   */
  figures(datasetId: string, conditions: Condition[], spec: FiguresSpec): Promise<Figures>;
  /**
   * The processed items matching `conditions` nearest to the vector, best first. The filter is
   * applied inside the nearest-neighbour search, so a page is never short while matches exist.
   */
  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]>;
  /** A random selection of processed items matching `conditions` (explore without an id). */
  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]>;
}
