import type { FiguresSpec, Figures } from '../domain/figures';
import type { GroupSpec, GroupedPage } from '../domain/group';
import type { StoredItem } from '../domain/item';
import type { Scalar } from '../domain/metadata';
import type { Condition } from '../query/ast';
import type { Projection } from '../domain/tuning/lda';
/** A picture's names for the duplicate report: its pixel hash and copy signature. */
export interface PictureKeys {
  pixelHash?: string;
  copySignature?: string;
}

/** An item's neighbours as a search finds them, with each picture's keys. */
export interface FoundNeighbours extends PictureKeys {
  id: string;
  processedAt: number;
  neighbours: Array<{ id: string; distance: number; processedAt: number } & PictureKeys>;
}

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
  /**
   * Rank every matching item exactly (contract §15 `exhaustive`); otherwise an engine may use an
   * approximate index.
   */
  exact?: boolean;
  /**
   * The page size a caller pages this ranking with (contract §15 `page`): the first `limit` hits
   * must be the first `limit` of one ranking, the same for every `limit` asked with this page size.
   */
  pageSize?: number;
  /** Leave out this many leading hits of the `limit` (a deep page needs only its own). */
  offset?: number;
  /**
   * Tuned similarity (contract §20): rank by (1 − weight) · cos(plain) + weight ·
   * cos(projected), the score being (1 + that blend) / 2.
   */
  tuning?: TunedQuery;
}

/** A dataset's active projection (contract §20), named by its stored id (never reused). */
export interface TunedQuery {
  model: string;
  projection: Projection;
  weight: number;
}

/** The stored projection a dataset ranks by while tuning is active, without the weight. */
export type ActiveProjection = Pick<TunedQuery, 'model' | 'projection'>;

/** The items a similarity request ranks: processed, with a vector of `embedder`, matching. */
export interface RankedSet {
  embedder: string;
  conditions: Condition[];
  excludeIds: string[];
}

/** A similarity hit; `score` is 0–1 ((1 + cosine) / 2), higher is more similar. */
export interface ScoredItem {
  item: StoredItem;
  score: number;
  vector?: number[];
}

/** A search whose page counts groups of `group.field` (contract §13). */
export interface GroupedSearchRequest extends SearchRequest {
  group: GroupSpec;
  /** Counts: exact up to this many matching groups; above, an engine may estimate and says so. */
  exactUpTo: number;
}

/** Field → value (as a string) → number of matching processed items. */
export type Facets = Record<string, Record<string, number>>;

/** Queries over processed items. Engines refuse what they cannot do; they never approximate. */
/** One page of a sweep that writes items' projections (SearchEngine.applyTuning). */
export interface TuningPage {
  changed: number;
  next?: string;
}

export interface SearchEngine {
  search(datasetId: string, req: SearchRequest): Promise<{ items: StoredItem[]; total: number }>;
  facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets>;
  /**
   * Contract §10 figures over every processed item matching `conditions` (never a page):
   * facets (a disjunctive one without the conditions on its own field), stats, histograms.
   */
  figures(datasetId: string, conditions: Condition[], spec: FiguresSpec): Promise<Figures>;
  /**
   * A page of groups in the order of `sort` (a group's place is its best item's), `offset` and
   * `limit` counting groups, each with its matching items counted and its first `size` items.
   */
  searchGroups(datasetId: string, req: GroupedSearchRequest): Promise<GroupedPage>;
  /**
   * Per value (matched as groupKey does), how many processed items matching `conditions` have
   * it as their scalar value of `field`.
   */
  groupCounts(
    datasetId: string,
    conditions: Condition[],
    field: string,
    values: Scalar[],
  ): Promise<number[]>;
  /**
   * The processed items matching `conditions` nearest to the vector, best first. The filter is
   * applied inside the nearest-neighbour search, so a page is never short while matches exist.
   */
  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]>;
  /** How many items `similar` ranks under these conditions (contract §15 `total_results`). */
  rankedCount(datasetId: string, set: RankedSet): Promise<number>;
  /**
   * For each of `ids` that is processed with a vector of `embedder` (the others are left out):
   * up to `k` other such items within cosine distance `maxDistance` (1 − cosine), closest first,
   * then by id, each with its processedAt (contract §18 near duplicates).
   */
  neighbours(
    datasetId: string,
    embedder: string,
    ids: readonly string[],
    maxDistance: number,
    k: number,
  ): Promise<FoundNeighbours[]>;
  /**
   * Where an engine keeps items' projections (contract §20): brings the next `limit` items
   * after `after` (in id order) of the dataset's vectors by `embedder` (of `dims` dimensions)
   * up to date with `tuning`'s projection. `changed` counts the items written and those
   * changed by another write meanwhile (0 for an engine that projects when it loads vectors);
   * `next` is where the following page starts, absent at the end.
   */
  applyTuning(
    datasetId: string,
    embedder: string,
    dims: number,
    tuning: ActiveProjection,
    after: string | undefined,
    limit: number,
  ): Promise<TuningPage>;
  /**
   * After a rewrite of a dataset's items (a fit's projections, a re-embedding): merges what the
   * rewrite left behind that slows searches, waiting while `keepWaiting` answers true; false when
   * it stopped waiting first (the merge goes on). Engines with nothing to merge answer true at
   * once.
   */
  compact(datasetId: string, keepWaiting: () => Promise<boolean>): Promise<boolean>;
  /** A random selection of processed items matching `conditions` (explore without an id). */
  sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]>;
}
