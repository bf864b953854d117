/**
 * What the near-duplicate report keeps between passes (contract §18), per dataset. Shared like
 * all state (§12): any worker may run the next pass, any API host reads the report.
 */

/** An item's neighbours as one search found them. */
export interface NeighbourEntry {
  id: string;
  /** The item's processedAt when it was searched: a later processing makes the entry stale. */
  processedAt: number;
  /**
   * Other items within the largest max_distance, closest first, with their processedAt and how
   * well the two pictures' layouts match (copy-signature.ts; absent without signatures).
   */
  neighbours: Array<{ id: string; distance: number; processedAt: number; match?: number }>;
}

export interface PassState {
  /** Items processed before this time (epoch ms) have been searched; absent: none yet. */
  watermark?: number;
  /** When the last pass finished (epoch ms); the report's `computed_at`. */
  computedAt?: number;
  /** The embedder whose vectors the entries compare; another one starts over. */
  embedder?: string;
  /**
   * A pass cut short (a slice ended, its process stopped): when it started, the last item id it
   * searched (items are listed in id order) and its embedder. The next pass goes on from there.
   */
  progress?: { started: number; after: string; embedder: string };
}

export interface DuplicateStore {
  /** Replaces the entries of these items; an entry without neighbours removes the item's. */
  putEntries(datasetId: string, entries: readonly NeighbourEntry[]): Promise<void>;
  /** Every entry of the dataset that has neighbours. */
  entries(datasetId: string): Promise<NeighbourEntry[]>;
  /** Removes the entries of these items (gone from the dataset). */
  forget(datasetId: string, ids: readonly string[]): Promise<void>;
  /** Every entry of the dataset's items, and its pass state (a new embedder, a deleted dataset). */
  clear(datasetId: string): Promise<void>;
  /** Everything of a deleted dataset: entries, pass state and dismissals. */
  dropDataset(datasetId: string): Promise<void>;
  /** Records that these items are not duplicates of each other. */
  dismiss(datasetId: string, ids: readonly string[]): Promise<void>;
  /** The dismissals recorded, each a set of ids (two or more). */
  dismissals(datasetId: string): Promise<string[][]>;
  state(datasetId: string): Promise<PassState>;
  setState(datasetId: string, state: PassState): Promise<void>;
  /** The installation-wide pass lease: true when `owner` holds it until `until`. */
  claim(owner: string, now: number, until: number): Promise<boolean>;
}
