import type { ItemProcessing } from './item-processing';
import type { ItemReader } from './item-reader';
import type { ItemWriter } from './item-writer';

export { PartialWrite } from './item-writer';

/** A dataset's items as each engine provides them: three ports, one adapter each. */
export interface ContentParts {
  reader: ItemReader;
  writer: ItemWriter;
  processing: ItemProcessing;
}

/** Items of a dataset and their processing state: the three ports, for callers that use several. */
export type ContentStore = ItemReader & ItemWriter & ItemProcessing;

/** The methods of each port, checked complete by the compiler: they are what contentStore joins. */
const METHODS: { [P in keyof ContentParts]: Record<keyof ContentParts[P], true> } = {
  reader: {
    existingIds: true,
    list: true,
    getItems: true,
    counts: true,
    catalogue: true,
    publicFields: true,
    getEmbedding: true,
    listErrors: true,
    sameImageGroups: true,
    processedSince: true,
    vectorsPage: true,
    ping: true,
  },
  writer: { applyWrites: true, deleteItems: true, dropDataset: true },
  processing: {
    markProcessed: true,
    markFailed: true,
    markEmbedded: true,
    markPostponed: true,
    pendingJobs: true,
    staleEmbeddings: true,
    staleEmbeddingCount: true,
  },
};

const joined = new WeakMap<object, ContentParts>();

/** One ContentStore whose every method is its part's: no logic of its own. */
export function contentStore(parts: ContentParts): ContentStore {
  const store: Record<string, unknown> = {};
  for (const part of Object.keys(METHODS) as Array<keyof ContentParts>) {
    const target = parts[part] as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of Object.keys(METHODS[part]))
      store[name] = (...args: unknown[]) => target[name]!(...args);
  }
  joined.set(store, parts);
  return store as unknown as ContentStore;
}

/** The parts a ContentStore was joined from (which adapter serves each port). */
export const contentParts = (store: ContentStore): ContentParts | undefined => joined.get(store);
