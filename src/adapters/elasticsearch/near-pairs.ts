import type { Client } from '@elastic/elasticsearch';
import { pictureKeys } from '../../domain/duplicates';
import type { FoundNeighbours } from '../../ports/search-engine';
import { compareText } from '../../domain/text-order';
import { docVector, vectorField, type ItemDoc } from './document';
import { unavailable } from './outage';

/** HNSW candidates per neighbour search: near copies are few and close, so recall is high. */
const CANDIDATES = 100;

type Hit = { _score?: number | null; _source?: ItemDoc };

/**
 * The neighbours of each of `ids` (contract §18 near duplicates): one kNN query per item in one
 * _msearch, each keeping only hits at cosine ≥ 1 − maxDistance (Elasticsearch's `similarity`
 * for a cosine field is the raw cosine), the item itself left out.
 */
export async function nearPairs(
  client: Client,
  index: string,
  embedder: string,
  ids: readonly string[],
  maxDistance: number,
  k: number,
): Promise<FoundNeighbours[]> {
  if (!ids.length) return [];
  const ranked = [{ term: { state: 'processed' } }, { term: { embedder } }];
  const own = await client.search<ItemDoc>({
    index,
    query: { bool: { filter: [...ranked, { terms: { id: [...ids] } }] } },
    size: ids.length,
    _source: ['id', 'image', 'embedding_f32', 'vector_*'],
    track_total_hits: false,
  });
  const queries = own.hits.hits.flatMap((h) => {
    const vector = docVector(h._source!);
    return vector ? [{ doc: h._source!, vector }] : [];
  });
  if (!queries.length) return [];
  const r = await client.msearch<ItemDoc>({
    index,
    searches: queries.flatMap((q) => [
      {},
      {
        knn: {
          field: vectorField(q.vector.length),
          query_vector: q.vector,
          k: k + 1,
          num_candidates: Math.max(CANDIDATES, k + 1),
          similarity: 1 - maxDistance,
          filter: { bool: { filter: ranked, must_not: [{ term: { id: q.doc.id } }] } },
        },
        size: k,
        _source: ['id', 'image'],
        track_total_hits: false,
      },
    ]) as never,
  });
  return queries.map((q, i) => {
    const answer = r.responses[i]!;
    if ('error' in answer) throw unavailable(`a neighbour search failed (${answer.status})`, 1);
    const neighbours = (answer.hits.hits as Hit[]).map((h) => ({
      id: h._source!.id,
      // the score of a cosine field is (1 + cos) / 2
      distance: Math.max(0, 2 - 2 * (h._score ?? 0)),
      processedAt: h._source!.image?.processedAt ?? 0,
      ...pictureKeys(h._source!.image),
    }));
    neighbours.sort((a, b) => a.distance - b.distance || compareText(a.id, b.id));
    return {
      id: q.doc.id,
      processedAt: q.doc.image?.processedAt ?? 0,
      ...pictureKeys(q.doc.image),
      neighbours,
    };
  });
}
