import { errors } from '@elastic/elasticsearch';
import type { ActiveProjection, TuningPage } from '../../ports/search-engine';
import { docFloats, fromDoc, projectedFields, toDoc, type ItemDoc } from './document';
import { embeddedBy } from './dsl';
import { ItemIndex, orEmpty } from './item-index';
import { tunedMapping } from './mapping';

/**
 * Writes each item's projection into its document (contract §20), with the HNSW field of its
 * embedding and projection together (blendField): items are rewritten whole with if_seq_no, as
 * every item write here (no scripts), so a write in between wins and the item is counted
 * changed, for the next sweep to look at.
 * Pages follow the ids, not what the search still finds stale: a search sees writes only after
 * the next refresh, so asking again for stale items would return the ones just written.
 */
export class EsTunedVectors extends ItemIndex {
  /** Indices (and blend sizes) whose field this process has added. */
  private readonly mapped = new Set<string>();

  /** The next `limit` items after `after` without this projection brought up to date. */
  async apply(
    datasetId: string,
    embedder: string,
    dims: number,
    t: ActiveProjection,
    after: string | undefined,
    limit: number,
  ): Promise<TuningPage> {
    const index = this.index(datasetId);
    return orEmpty(
      async () => {
        await this.addField(index, dims + t.projection.k);
        const r = await this.client.search<ItemDoc>({
          index,
          size: limit,
          query: {
            bool: {
              filter: embeddedBy(embedder, dims),
              must_not: [{ term: { blend_model: t.model } }],
            },
          },
          sort: [{ id: 'asc' }],
          _source: ['id'],
          track_total_hits: false,
          ...(after !== undefined ? { search_after: [after] } : {}),
        });
        const found = r.hits.hits;
        if (!found.length) return { changed: 0 };
        const ids = found.map((h) => h._id!);
        const next = found.length < limit ? undefined : found.at(-1)!._source!.id;
        const { hits } = await this.mget(datasetId, ids);
        const ops: object[] = [];
        for (const h of hits) {
          const src = h._source!;
          const v = src.state === 'processed' ? docFloats(src) : undefined;
          if (!v || v.length !== t.projection.dims || src.blend_model === t.model) continue;
          // the previous projection is not carried over (nor its blend field, of another size)
          const doc = toDoc(datasetId, fromDoc(src), src.error ?? null, {
            ...src,
            blend_model: null,
          });
          ops.push(
            {
              index: {
                _index: index,
                _id: h._id,
                if_seq_no: h._seq_no,
                if_primary_term: h._primary_term,
              },
            },
            { ...doc, ...projectedFields(t, v) },
          );
        }
        if (ops.length) {
          const w = await this.client.bulk({ operations: ops as never[] });
          // a conflict is a write in between, counted changed so the next sweep looks again; any
          // other refusal of every write (a read-only cluster) must not spin the pass
          const refused = w.items.filter((i) => i.index?.error && i.index.status !== 409);
          if (refused.length === w.items.length)
            throw new Error(
              `Elasticsearch refused every projection written: ${refused[0]?.index?.error?.reason ?? 'unknown'}`,
            );
        }
        return { changed: ops.length / 2, ...(next !== undefined ? { next } : {}) };
      },
      { changed: 0 },
    );
  }

  private async addField(index: string, n: number): Promise<void> {
    const key = `${index}\u0000${n}`;
    if (this.mapped.has(key)) return;
    try {
      await this.client.indices.putMapping({ index, properties: tunedMapping(n) as never });
    } catch (e) {
      if (e instanceof errors.ResponseError && e.statusCode === 400)
        throw new Error(
          `Elasticsearch: cannot add the ${n}-dimension blend field to ${index}: ${e.message}`,
          { cause: e },
        );
      throw e;
    }
    this.mapped.add(key);
  }
}
