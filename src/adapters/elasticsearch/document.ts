import type { ItemState, StoredItem } from '../../domain/item';
import { blendDocVector, project } from '../../domain/tuning/lda';
import type { ActiveProjection } from '../../ports/search-engine';
import type { Metadata } from '../../domain/metadata';
import { NO_COUNTS, countFields, type ItemCounts } from '../../domain/popularity';
import type { ProcessingFailure } from '../../domain/processing';
import { itemTerms, valueRows, type Scope } from '../value-index';

interface Attr {
  f: string;
  scope: Scope;
  t: 's' | 'n' | 'b';
  arr: boolean;
  s?: string;
  n?: number;
}

export interface ItemDoc {
  dataset: string;
  id: string;
  url: string;
  state: ItemState;
  created_at: number;
  updated_at: number;
  metadata: Metadata;
  private_metadata: Metadata;
  image?: StoredItem['image'] | null;
  error?: (ProcessingFailure & { url: string; occurred_at: string }) | null;
  has_error: boolean;
  terms: string[];
  attrs: Attr[];
  /** The embedder that made the item's embedding (set without a vector when it failed). */
  embedder?: string | null;
  /**
   * The embedding for the HNSW index, in the field for its length (see vectorField). The item
   * mapping leaves it out of the stored `_source` (indices made before that keep it there).
   * Written as a Float32Array, which the client sends as float32 text (VectorTextSerializer).
   */
  [vector: `vector_${number}`]: number[] | Float32Array | null | undefined;
  /** The same embedding as stored: float32 bytes, base64 (see EMBEDDING_SOURCE). */
  embedding_f32?: string | null;
  /**
   * Tuned similarity (contract §20): the projection of the embedding by the stored projection
   * `blend_model`, as float32 bytes in base64, and the embedding and projection together in one
   * HNSW field (blendField, blendDocVector) for a single kNN by the blend.
   */
  blend_model?: string | null;
  tuned_f32?: string | null;
  [blend: `vector_blend_${number}`]: Float32Array | number[] | null | undefined;
  /** The rolled-up counts (contract §14); absent on documents written before they existed. */
  counts?: ItemCounts & { at?: number };
  /** image.pixelHash and image.processedAt, searchable (contract §18). */
  pixel_hash?: string | null;
  processed_at?: number | null;
}

/**
 * Where an item's embedding is kept for reading back (similar by id, explore, and every
 * read-modify-write of the item, which must carry it over): a base64 string of float32 bytes.
 * 1,420 floats as JSON numbers are ~25 KB of text that every search parses to filter out of each
 * hit's `_source`; as one string they are 7.6 KB, read back bit for bit.
 */
export const EMBEDDING_SOURCE = 'embedding_f32';

const encodeVector = (f: Float32Array): string =>
  Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString('base64');

const decodeVector = (b64: string): Float32Array => {
  const bytes = Buffer.from(b64, 'base64');
  // copied: a Buffer's offset in its pool need not be a multiple of 4
  return new Float32Array(Uint8Array.from(bytes).buffer);
};

/**
 * A dense_vector field has fixed dims, so vectors of each length get a field of their own:
 * switching to an embedder of another size adds a field instead of needing a reindex.
 */
export const vectorField = (dims: number): `vector_${number}` => `vector_${dims}`;

/** The HNSW field of embeddings and projections of `n` dimensions together (contract §20). */
export const blendField = (n: number): `vector_blend_${number}` => `vector_blend_${n}`;

/**
 * The fields that carry an item's projection `z` of its embedding `x` by the stored projection
 * `model`. A zero projection gets no blend vector; searches rank such items exactly.
 */
function tunedFields(model: string, x: Float32Array, z: Float32Array): Partial<ItemDoc> {
  const out: Partial<ItemDoc> = { blend_model: model, tuned_f32: encodeVector(z) };
  const b = blendDocVector(x, z);
  if (b) out[blendField(b.length)] = b;
  return out;
}

/** The fields that carry the projection of embedding `x` by the active projection `t`. */
export const projectedFields = (t: ActiveProjection, x: Float32Array): Partial<ItemDoc> =>
  tunedFields(t.model, x, project(t.projection, x));

/** The strict mapping's refusal names a blend field the index lacks. */
export const refusesBlendField = (body: unknown): boolean =>
  JSON.stringify(body ?? '').includes('[vector_blend_');

/** The document without its projection, for an index that has no blend field for it. */
export function withoutTuning(d: ItemDoc): ItemDoc {
  const out: ItemDoc = { ...d, blend_model: null, tuned_f32: null };
  for (const k of Object.keys(out)) if (k.startsWith('vector_blend_')) delete out[k as never];
  return out;
}

/** A previous document's projection, carried over while its embedding is. */
function keptTuning(d: ItemDoc, x: Float32Array): Partial<ItemDoc> {
  if (!d.blend_model || !d.tuned_f32) return {};
  return tunedFields(d.blend_model, x, decodeVector(d.tuned_f32));
}

/** The document's embedding as float32s, whichever field holds it. */
export function docFloats(d: ItemDoc): Float32Array | undefined {
  if (d.embedding_f32) return decodeVector(d.embedding_f32);
  // indices made before vectors left the stored _source
  for (const [k, v] of Object.entries(d))
    if (k.startsWith('vector_') && Array.isArray(v) && v.length) return Float32Array.from(v);
  return undefined;
}

/** The document's embedding, whichever field holds it. */
export function docVector(d: ItemDoc): number[] | undefined {
  const f = docFloats(d);
  return f && Array.from(f);
}

const toAttrs = (md: Metadata, scope: Scope): Attr[] =>
  valueRows(md, scope).map((r) => ({
    f: r.field,
    scope: r.scope,
    t: r.vtype,
    arr: r.isArray === 1,
    ...(r.sval !== null ? { s: r.sval } : {}),
    ...(r.nval !== null ? { n: r.nval } : {}),
  }));

/**
 * The document for an item. `embedding` is the new one (on processing) or the previous
 * document's, kept while the item stays processed with the same url.
 */
export function toDoc(
  datasetId: string,
  item: StoredItem,
  error: ItemDoc['error'] = null,
  embedding?: { vector: number[]; embedder: string } | ItemDoc,
): ItemDoc {
  const kept =
    embedding && 'dataset' in embedding
      ? embedding.url === item.url && item.state === 'processed'
        ? { vector: docFloats(embedding), embedder: embedding.embedder }
        : undefined
      : embedding;
  // a kept embedding is carried over as the float32s it was stored as, not copied via numbers
  const vector = !kept?.vector?.length
    ? undefined
    : kept.vector instanceof Float32Array
      ? kept.vector
      : Float32Array.from(kept.vector);
  const counts = item.counts ?? NO_COUNTS;
  const gen = toAttrs(
    {
      ...(item.image
        ? {
            image_width: item.image.width,
            image_height: item.image.height,
            image_url: item.image.url,
          }
        : {}),
      // on every item, so ranges, sort and stats see the zeros too
      ...countFields(counts),
    },
    'gen',
  );
  return {
    dataset: datasetId,
    id: item.id,
    url: item.url,
    state: item.state,
    created_at: item.createdAt,
    updated_at: item.updatedAt,
    metadata: item.metadata,
    private_metadata: item.privateMetadata,
    image: item.image ?? null,
    pixel_hash: item.image?.pixelHash ?? null,
    processed_at: item.image?.processedAt ?? null,
    error,
    has_error: !!error,
    terms: itemTerms(item.metadata),
    attrs: [...toAttrs(item.metadata, 'pub'), ...toAttrs(item.privateMetadata, 'priv'), ...gen],
    embedder: kept?.embedder ?? null,
    counts: {
      popularity: counts.popularity,
      purchases: counts.purchases,
      ...(item.counts?.at !== undefined ? { at: item.counts.at } : {}),
    },
    ...(vector
      ? { [vectorField(vector.length)]: vector, [EMBEDDING_SOURCE]: encodeVector(vector) }
      : {}),
    // the projection stays with the embedding it was made from; a new one waits for the pass
    ...(vector && embedding && 'dataset' in embedding ? keptTuning(embedding, vector) : {}),
  };
}

export function fromDoc(d: ItemDoc): StoredItem {
  return {
    id: d.id,
    url: d.url,
    metadata: d.metadata,
    privateMetadata: d.private_metadata,
    state: d.state,
    createdAt: d.created_at,
    updatedAt: d.updated_at,
    ...(d.state === 'processed' && d.image ? { image: d.image } : {}),
    ...(d.counts ? { counts: d.counts } : {}),
  };
}
