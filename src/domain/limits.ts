type Unit = 'bytes' | 'characters' | 'items' | 'values' | 'ms' | 'count' | 'pixels';

interface Limit {
  value: number;
  unit: Unit;
  /** What it bounds and what a client sees past it (docs/limits.md is made from this). */
  what: string;
}

/**
 * Every size, count and time limit a client or an operator can meet, in one table: the code
 * reads `LIMITS`, docs/limits.md is generated from it and a test keeps the two equal
 * (test/unit/limits-doc.test.ts), and tests read the numbers from here.
 */
export const LIMIT_TABLE = {
  itemIdMaxLength: { value: 100, unit: 'characters', what: 'item id (400 above)' },
  urlMaxLength: { value: 2048, unit: 'characters', what: 'image url (400 above)' },
  requestBodyBytes: {
    // contract §2: 413 only above 5 MB, on every route but lens (its own rule, §7)
    value: 5 * 1024 * 1024,
    unit: 'bytes',
    what: 'body of any request but a lens search: content, GraphQL, track, settings and the rest (413 above)',
  },
  lensBodyBytes: { value: 500 * 1024, unit: 'bytes', what: 'body of a lens search (413 above)' },
  listDefault: { value: 1000, unit: 'items', what: 'content listing page, default' },
  listMax: { value: 1000, unit: 'items', what: 'content listing page, at most (400 above)' },
  deleteMaxIds: { value: 1000, unit: 'items', what: 'ids in one DELETE content (400 above)' },
  detailsMaxIds: { value: 1000, unit: 'items', what: 'ids in one content/details (400 above)' },
  pageSizeDefault: { value: 10, unit: 'items', what: 'search/similar page size, default' },
  pageSizeMin: { value: 2, unit: 'items', what: 'search/similar page size, at least' },
  pageSizeMax: { value: 50, unit: 'items', what: 'search/similar page size, at most' },
  maxResultWindow: {
    value: 10_000,
    unit: 'items',
    what: 'page × limit of a search (contract §6; 400 beyond)',
  },
  minProcessedForVision: {
    value: 200,
    unit: 'items',
    what: 'processed items before Vision API queries answer (409 dataset_not_ready below)',
  },
  indexedArrayValues: {
    value: 200,
    unit: 'values',
    what: 'indexed values of one item (400 above)',
  },
  metadataKeyMaxLength: { value: 256, unit: 'characters', what: 'metadata key (400 above)' },
  metadataStringMaxBytes: {
    // Lucene's longest term: a value both engines index whole, so q, sort and facets see it all
    value: 32_766,
    unit: 'bytes',
    what: 'metadata string value, array elements included, in UTF-8 (400 above)',
  },
  metadataArrayMaxLength: { value: 1_000, unit: 'values', what: 'metadata array (400 above)' },
  qMaxLength: { value: 4_096, unit: 'characters', what: '`q` parameter (400 above)' },
  vMaxLength: { value: 2_048, unit: 'characters', what: '`v` parameter (400 above)' },
  orgNameMax: { value: 64, unit: 'characters', what: 'organisation name (400 above)' },
  datasetNameMax: { value: 100, unit: 'characters', what: 'dataset name (400 above)' },
  refusedBodyDrainBytes: {
    value: 16 * 1024 * 1024,
    unit: 'bytes',
    what: 'body read and discarded after an early error, so every client reads the answer (beyond it the connection closes)',
  },
  refusedBodyDrainMs: {
    value: 30_000,
    unit: 'ms',
    what: 'time spent discarding such a body',
  },
  facetSizeDefault: { value: 10, unit: 'values', what: 'values listed per facet, default' },
  facetSizeMax: {
    value: 1000,
    unit: 'values',
    what: 'values listed per facet (`facet_size`, 400 above)',
  },
  histogramMaxBuckets: {
    value: 1000,
    unit: 'count',
    what: 'buckets of one histogram (400 above, before anything is counted)',
  },
  groupSizeMax: {
    value: 10,
    unit: 'items',
    what: 'items shown per group (`group_size`, contract §13; 400 above)',
  },
  groupExactMax: {
    value: 10_000,
    unit: 'count',
    what: 'matching groups counted exactly (contract §13); above it `total_groups_exact` and group facets say they estimate',
  },
  collectionMaxIds: { value: 50, unit: 'items', what: 'ids of one collection request (400 above)' },
  collectionMaxNegativeIds: {
    value: 50,
    unit: 'items',
    what: '`negative_ids` of one collection request (contract §15; 400 above)',
  },
  scopedFieldsMax: {
    value: 1_000,
    unit: 'count',
    what: '`fields` of one scoped token (contract §16; 400 at minting, 401 in a token above)',
  },
  scopedRateMax: {
    value: 100_000,
    unit: 'count',
    what: '`rate` of one scoped token: requests per minute (contract §16)',
  },
  scopedUidMaxLength: {
    value: 100,
    unit: 'characters',
    what: '`uid` of one scoped token (contract §16)',
  },
  diversityCandidatesMax: {
    value: 500,
    unit: 'items',
    what: '`candidates` a diversified similarity request chooses from (contract §15; default 4 × limit; 400 above)',
  },
  similarDepthMax: {
    value: 1000,
    unit: 'items',
    what: 'how deep similarity results page: `page` × `limit` (contract §15; 400 above)',
  },
  trackMaxEvents: { value: 1000, unit: 'items', what: 'events of one track request (400 above)' },
  trackFutureMs: {
    value: 5 * 60_000,
    unit: 'ms',
    what: 'how far in the future a tracked event `timestamp` may lie (clock skew; 400 beyond)',
  },
  trackMaxQty: {
    value: 1_000_000,
    unit: 'count',
    what: '`qty` of one tracked purchase (a positive integer; 400 above)',
  },
  popularityWindowMs: {
    value: 30 * 86_400_000,
    unit: 'ms',
    what: 'events counted by `service_popularity` and `service_purchases`: the trailing 30 days by event time (contract §14)',
  },
  popularityPassMs: {
    value: 30_000,
    unit: 'ms',
    what: 'the popularity roll-up runs at most this often across the installation (one pass per interval, whichever process takes it)',
  },
  reportTopDefault: {
    value: 10,
    unit: 'values',
    what: 'entries of each "most used" list of the analytics report, default',
  },
  reportTopMax: {
    value: 100,
    unit: 'values',
    what: 'entries of each "most used" list of the analytics report (`top`, 400 above)',
  },
  reportMaxActions: {
    value: 50,
    unit: 'values',
    what: "tracked actions listed per interval of the analytics report (the most frequent; 1,000 intervals × 50 stays within Elasticsearch's 65,536 aggregation buckets)",
  },
  imageFetchTimeoutMs: {
    value: 15_000,
    unit: 'ms',
    what: 'one image download, connect to last byte (a transient `timeout`, retried)',
  },
  imageMaxBytes: {
    value: 20 * 1024 * 1024,
    unit: 'bytes',
    what: 'one image download (`too_large`, not retried)',
  },
  imageMaxRedirects: { value: 3, unit: 'count', what: 'redirects followed for one image' },
  imageMaxPixels: {
    value: 40_000_000,
    unit: 'pixels',
    what: 'one image, width × height (`too_large`)',
  },
  decodeBudgetBytes: {
    value: 224 * 2 ** 20,
    unit: 'bytes',
    what: 'memory of image decodes in flight per process, workers and lens together (others wait; a large progressive JPEG is read from its DC scans in a few MB; an interlaced PNG needing more than this alone is `too_large`)',
  },
  imageAttempts: {
    value: 4,
    unit: 'count',
    what: 'tries of an image that fails transiently (5xx, timeout, DNS), 1 s / 4 s / 16 s apart',
  },
  // GraphQL operation shape (graphql-armor and graphql-js's parser), checked before anything
  // runs. Generous for any real client (the deepest useful query is 7 levels); content batches
  // belong in variables, which do not count as tokens.
  graphqlMaxDepth: { value: 10, unit: 'count', what: 'GraphQL selection depth (400 above)' },
  graphqlMaxAliases: { value: 15, unit: 'count', what: 'GraphQL aliases in one operation (400)' },
  graphqlMaxCost: {
    value: 5000,
    unit: 'count',
    what: 'GraphQL operation cost, fields weighted by depth (400 above)',
  },
  graphqlMaxTokens: {
    value: 5000,
    unit: 'count',
    what: 'GraphQL tokens in one document, variables not counted (400 above)',
  },
  graphqlMaxDirectives: {
    value: 20,
    unit: 'count',
    what: 'GraphQL directives in one operation (400 above)',
  },
  webhooksPerOrg: {
    value: 20,
    unit: 'count',
    what: 'webhooks one organisation may register (contract §17; 400 above)',
  },
  webhookDatasets: {
    value: 100,
    unit: 'count',
    what: 'datasets one webhook may name (400 above)',
  },
  webhookUrlLength: {
    value: 2048,
    unit: 'characters',
    what: 'length of a webhook URL (400 above)',
  },
  webhookDeliveryLog: {
    value: 1000,
    unit: 'count',
    what: 'deliveries kept per webhook, newest first (pending ones are never dropped)',
  },
  webhookBatch: {
    value: 1000,
    unit: 'count',
    what: 'item ids (or errors) in one items.processed or items.failed delivery',
  },
} as const satisfies Record<string, Limit>;

/** The values of {@link LIMIT_TABLE}. */
export const LIMITS = Object.fromEntries(
  Object.entries(LIMIT_TABLE).map(([k, l]) => [k, l.value]),
) as { readonly [K in keyof typeof LIMIT_TABLE]: number };

/** Fields the service generates; clients may not write them, but may request, sort and filter. */
export const GENERATED_FIELDS = [
  'image_width',
  'image_height',
  'image_url',
  'service_popularity',
  'service_purchases',
] as const;
export const SERVICE_TIME_FIELDS = ['service_created_at', 'service_updated_at'] as const;
export type ServiceTimeField = (typeof SERVICE_TIME_FIELDS)[number];
export const RESERVED_FIELDS: ReadonlySet<string> = new Set<string>([
  ...GENERATED_FIELDS,
  ...SERVICE_TIME_FIELDS,
]);
export const TEXT_FIELD = 'text';

export const isServiceTimeField = (f: string): f is ServiceTimeField =>
  (SERVICE_TIME_FIELDS as readonly string[]).includes(f);
