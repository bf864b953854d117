import { errors, type Client } from '@elastic/elasticsearch';
import type { ItemDoc } from './document';
import { unavailable } from './outage';
import type { EsIndices } from './indices';

/** One document of an item index as a read returns it. */
export type Hit = {
  _id: string;
  _source?: ItemDoc;
  _seq_no?: number;
  _primary_term?: number;
  sort?: unknown[];
};

/** The documents an mget found, and whether the dataset's index does not exist (yet, or any more). */
export interface Found {
  hits: Hit[];
  indexMissing: boolean;
}

const INDEX_MISSING = 'index_not_found_exception';

/** The dataset's index does not exist: another host may have deleted it, or none wrote yet. */
export const isIndexMissing = (e: unknown): boolean =>
  e instanceof errors.ResponseError && e.body?.error?.type === INDEX_MISSING;

/**
 * Runs a read of one dataset's index and answers `empty` when the index does not exist. No
 * `indices.exists` round trip first and no memory of which indices exist: another host may
 * create or delete an index at any moment, so the answer of the read itself is the only truth.
 */
export async function orEmpty<T>(read: () => Promise<T>, empty: T): Promise<T> {
  try {
    return await read();
  } catch (e) {
    if (isIndexMissing(e)) return empty;
    throw e;
  }
}

const chunks = <T>(xs: T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

/** What every part of the item adapter shares: the index names and reads by id. */
export abstract class ItemIndex {
  constructor(protected readonly indices: EsIndices) {}

  protected get client(): Client {
    return this.indices.client;
  }

  protected index(datasetId: string): string {
    return this.indices.items(datasetId);
  }

  /**
   * Reads documents by id. `realtime` reads see unrefreshed writes (needed for compare-and-swap);
   * client-facing reads are not realtime, so details, listing and search agree on what exists.
   *
   * An absent index answers as no documents (`indexMissing`). Any other per-document error (a
   * shard that cannot answer) is a 503, never "not found": a worker that read it as absent would
   * acknowledge its job as done and the item would stay unprocessed.
   */
  protected async mget(
    datasetId: string,
    ids: string[],
    { source = true, realtime = true }: { source?: boolean; realtime?: boolean } = {},
  ): Promise<Found> {
    const out: Found = { hits: [], indexMissing: false };
    for (const part of chunks([...new Set(ids)], 1000)) {
      let docs;
      try {
        docs = (
          await this.client.mget<ItemDoc>({
            index: this.index(datasetId),
            ids: part,
            _source: source,
            realtime,
          })
        ).docs;
      } catch (e) {
        if (!isIndexMissing(e)) throw e;
        return { hits: [], indexMissing: true };
      }
      for (const d of docs) {
        if ('error' in d) {
          if (d.error.type === INDEX_MISSING) {
            out.indexMissing = true;
            continue;
          }
          throw unavailable(
            `the search engine could not read item '${d._id}' (${d.error.reason ?? d.error.type}); try again shortly`,
          );
        }
        if (d.found) out.hits.push(d as Hit);
      }
    }
    return out;
  }
}
