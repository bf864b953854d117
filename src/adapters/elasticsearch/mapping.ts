import { EMBEDDING_SOURCE, blendField, vectorField } from './document';

/** Stored only (binary: neither indexed nor in doc values). */
export const EMBEDDING_SOURCE_MAPPING = { [EMBEDDING_SOURCE]: { type: 'binary' } } as const;

/** An item's rolled-up counts (contract §14), stored only: queries read them from `attrs`. */
export const COUNTS_MAPPING = { counts: { type: 'object', enabled: false } } as const;

/**
 * The image's pixel hash (contract §18): exact duplicates are its values held by two items; and
 * when it was processed, so the duplicate pass finds the items processed since its last.
 */
export const DUPLICATES_MAPPING = {
  pixel_hash: { type: 'keyword' },
  processed_at: { type: 'long' },
} as const;

/**
 * Tuned similarity (contract §20): which stored projection an item's projection is of, and the
 * projection as float32 bytes (stored only); the HNSW field of embedding and projection together
 * is added per size (tunedMapping).
 */
export const TUNED_MAPPING = {
  blend_model: { type: 'keyword' },
  tuned_f32: { type: 'binary' },
} as const;

/** The HNSW field for embeddings and projections of `n` dimensions together. */
export function tunedMapping(n: number): Record<string, unknown> {
  return {
    ...TUNED_MAPPING,
    [blendField(n)]: {
      type: 'dense_vector',
      dims: n,
      index: true,
      similarity: 'cosine',
      index_options: { type: 'hnsw', m: 16, ef_construction: 100 },
    },
  };
}

/**
 * One index per dataset, with a fixed mapping: metadata never becomes mapped fields of its own
 * (no mapping explosion, and a key may hold a number in one item and a string in another).
 * Values live in the nested `attrs` list, one entry per value, exactly like the embedded
 * engine's value index, so both engines answer the same way.
 */
const BASE_MAPPING = {
  dynamic: 'strict',
  // The HNSW field is indexed from the written document but not stored twice: the embedding is
  // read back from EMBEDDING_SOURCE (document.ts), a compact copy.
  _source: { excludes: ['vector_*'] },
  properties: {
    dataset: { type: 'keyword' },
    id: { type: 'keyword' },
    url: { type: 'keyword', index: false },
    state: { type: 'keyword' },
    created_at: { type: 'long' },
    updated_at: { type: 'long' },
    metadata: { type: 'object', enabled: false },
    private_metadata: { type: 'object', enabled: false },
    image: { type: 'object', enabled: false },
    error: { type: 'object', enabled: false },
    has_error: { type: 'boolean' },
    terms: { type: 'keyword' },
    attrs: {
      type: 'nested',
      properties: {
        f: { type: 'keyword' },
        scope: { type: 'keyword' },
        t: { type: 'keyword' },
        arr: { type: 'boolean' },
        s: { type: 'keyword' },
        n: { type: 'double' },
      },
    },
    embedder: { type: 'keyword' },
    ...EMBEDDING_SOURCE_MAPPING,
    ...COUNTS_MAPPING,
    ...DUPLICATES_MAPPING,
    ...TUNED_MAPPING,
  },
} as const;

/**
 * The mapping with the embedding field. Full-precision HNSW (not the quantised default), so
 * recall against exact search stays high (docs/engines.md).
 */
export function itemMapping(dims: number): Record<string, unknown> {
  return {
    ...BASE_MAPPING,
    properties: { ...BASE_MAPPING.properties, ...vectorMapping(dims) },
  };
}

/** The field for vectors of `dims` dimensions (see vectorField). */
export function vectorMapping(dims: number): Record<string, unknown> {
  return {
    // with its stored copy: an index made by a host of an older release gets both together
    ...EMBEDDING_SOURCE_MAPPING,
    [vectorField(dims)]: {
      type: 'dense_vector',
      dims,
      index: true,
      similarity: 'cosine',
      index_options: { type: 'hnsw', m: 16, ef_construction: 100 },
    },
  };
}
