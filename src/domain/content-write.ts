import type { ContentWrite, WriteMode } from './content';
import type { StoredItem } from './item';
import { mergeMetadata, type Metadata, type MetadataPatch } from './metadata';

export interface WriteOutcome {
  item: StoredItem;
  /** The image must be (re)processed: new item, changed url, or a failed item sent again. */
  reprocess: boolean;
  urlChanged: boolean;
  metadataChanged: boolean;
  /**
   * The item waits for processing after this write, so a job is queued, again if it was
   * pending already: its first job may have been lost with a write that failed half-way, and
   * sending the same request again must repair that. Jobs are idempotent.
   */
  needsJob: boolean;
}

/**
 * How one write changes one item, for every engine. POST replaces metadata when present; PUT
 * merges it; an unchanged url is not downloaded again unless its last processing failed.
 * Returns undefined when the write cannot apply (PUT or url-less write on a missing item).
 */
export function applyWrite(
  old: StoredItem | undefined,
  w: ContentWrite,
  mode: WriteMode,
  now: number,
): WriteOutcome | undefined {
  if (!old) {
    if (mode === 'put' || w.url === undefined) return undefined;
    return {
      item: {
        id: w.id,
        url: w.url,
        metadata: (w.metadata ?? {}) as Metadata,
        privateMetadata: (w.privateMetadata ?? {}) as Metadata,
        state: 'pending',
        createdAt: now,
        updatedAt: now,
      },
      reprocess: true,
      urlChanged: true,
      metadataChanged: true,
      needsJob: true,
    };
  }
  const next = (base: Metadata, given: ContentWrite['metadata']): Metadata =>
    given === undefined
      ? base
      : mode === 'post'
        ? (given as Metadata)
        : mergeMetadata(base, given as MetadataPatch);
  const metadata = next(old.metadata, w.metadata);
  const privateMetadata = next(old.privateMetadata, w.privateMetadata);
  const url = w.url ?? old.url;
  const urlChanged = url !== old.url;
  const reprocess = urlChanged || old.state === 'failed';
  const metadataChanged =
    JSON.stringify(metadata) !== JSON.stringify(old.metadata) ||
    JSON.stringify(privateMetadata) !== JSON.stringify(old.privateMetadata);
  const item: StoredItem = {
    ...old,
    url,
    metadata,
    privateMetadata,
    state: reprocess ? 'pending' : old.state,
    updatedAt: now,
  };
  if (urlChanged) delete item.image;
  return { item, reprocess, urlChanged, metadataChanged, needsJob: item.state === 'pending' };
}
