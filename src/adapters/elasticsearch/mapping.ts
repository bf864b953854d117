/**
 * One index per dataset, with a fixed mapping: metadata never becomes mapped fields of its own
 * (no mapping explosion, and a key may hold a number in one item and a string in another).
 * Values live in the nested `attrs` list, one entry per value, exactly like the embedded
 * engine's value index, so both engines answer the same way.
 */
export const ITEM_MAPPING = {
  dynamic: 'strict',
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
  },
} as const;

export const ITEM_SETTINGS = {
  number_of_shards: 1,
  number_of_replicas: 0,
  // writes wait for a refresh (202 means listed); a short interval keeps that wait small
  refresh_interval: '250ms',
  // a metadata array may hold up to 1,000 values per field
  'mapping.nested_objects.limit': 100_000,
} as const;
