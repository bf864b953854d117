import type { DatasetCounts } from '../domain/dataset';
import type { ListEntry, ProcessingErrorRecord, StoredItem } from '../domain/item';
import type { FieldCatalogue } from '../query/resolve';
import { labelOf } from '../domain/tuning/settings';

export interface StoredEmbedding {
  vector?: number[];
  embedder?: string;
}

/** A processed item's vector with its label (contract §20). */
export interface LabelledVector {
  id: string;
  vector: Float32Array;
  label?: string;
  pixelHash?: string;
}

/** The same from an item as an engine stores it: the label is its metadata value of `field`. */
export function labelledVector(
  item: { id: string; metadata?: Record<string, unknown>; pixelHash?: string | null },
  vector: Float32Array,
  field: string,
): LabelledVector {
  const label = labelOf(item.metadata?.[field]);
  return {
    id: item.id,
    vector,
    ...(label !== undefined ? { label } : {}),
    ...(item.pixelHash ? { pixelHash: item.pixelHash } : {}),
  };
}

/** Reads of a dataset's items by id and in id order, their counts, fields and errors. */
export interface ItemReader {
  /** Ids of `ids` that exist in the dataset. */
  existingIds(datasetId: string, ids: string[]): Promise<Set<string>>;
  /** Items in id (code point) order. */
  list(datasetId: string, offset: number, limit: number): Promise<ListEntry[]>;
  /**
   * Items by id as queries see them; `latest` reads the newest write instead (a worker deciding
   * what its own job did), which an engine with a refresh delay may answer differently.
   */
  getItems(datasetId: string, ids: string[], opts?: { latest?: boolean }): Promise<StoredItem[]>;
  /**
   * The dataset's counts as queries see them; `fresh` first makes every write made before the
   * call visible (an engine with a refresh delay refreshes), for a judgement that compares the
   * counts with records of those writes.
   */
  counts(datasetId: string, opts?: { fresh?: boolean }): Promise<DatasetCounts>;
  catalogue(datasetId: string): Promise<FieldCatalogue>;
  /** Public and generated field names, for content/fields `*`. */
  publicFields(datasetId: string): Promise<string[]>;
  /**
   * A processed item's embedding and the embedder that made it; undefined when the item is
   * unknown or not processed. `vector` is absent when the image could not be embedded again
   * after an embedder change, `embedder` too when the item predates embeddings.
   */
  getEmbedding(
    datasetId: string,
    id: string,
    opts?: { latest?: boolean },
  ): Promise<StoredEmbedding | undefined>;
  listErrors(
    datasetId: string,
    offset: number,
    limit: number,
  ): Promise<{ errors: ProcessingErrorRecord[]; total: number }>;
  /**
   * Processed items whose images are the same picture (equal pixel hashes, contract §18), as
   * queries see them: groups of two or more ids, each in id order, the groups in no order.
   */
  sameImageGroups(datasetId: string): Promise<string[][]>;
  /**
   * Processed items as queries see them, in id order after `after`, at most `limit`: those
   * processed at or after `since` (every one when undefined), with their processedAt (0 for
   * items processed before it was kept). The duplicate pass's list of what to search.
   */
  processedSince(
    datasetId: string,
    since: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<Array<{ id: string; processedAt: number }>>;
  /**
   * Processed items with a vector of `embedder` and a public value of `field`, as queries see
   * them, in id order after `after`, at most `limit`: each with its vector, that value as a
   * label (a string or a number; absent otherwise) and its pixel hash; and where the next page
   * starts (absent after the last). What a similarity fit learns from.
   */
  vectorsPage(
    datasetId: string,
    embedder: string,
    field: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ items: LabelledVector[]; next?: string }>;
  /** Resolves when the items can be read (readiness, and a worker's probe after an outage). */
  ping(): Promise<void>;
}
