import { errors, type Client } from '@elastic/elasticsearch';
import {
  COUNTS_MAPPING,
  DUPLICATES_MAPPING,
  EMBEDDING_SOURCE_MAPPING,
  TUNED_MAPPING,
  itemMapping,
} from './mapping';

/** Shards and replicas of every index (ELASTICSEARCH_SHARDS / ELASTICSEARCH_REPLICAS). */
export interface IndexLayout {
  shards: number;
  replicas: number;
}

const keyword = { type: 'keyword' } as const;
const long = { type: 'long' } as const;
const opaque = { type: 'object', enabled: false } as const;

/**
 * The shared (non-item) indices and their explicit mappings. `dynamic: strict` refuses a
 * document with a field the code did not declare, so a typo fails loudly instead of mapping.
 */
const SHARED = {
  /** Organisations; _id = name. */
  orgs: { name: keyword, plan: opaque, created_at: keyword },
  /** Token hashes; _id = prefix. */
  tokens: {
    kind: keyword,
    org: keyword,
    dataset_id: keyword,
    hash: { type: 'keyword', index: false },
    created_at: keyword,
  },
  /** Datasets; _id = dataset id. Deleted ones stay (usage reports their names). */
  datasets: {
    org: keyword,
    name: keyword,
    fields: opaque,
    settings_version: { type: 'integer' },
    browse_rotation: { type: 'integer' },
    created_at: keyword,
    deleted_at: keyword,
    embedder: keyword,
    embedder_dims: { type: 'integer' },
    similarity: opaque,
  },
  /**
   * Live dataset names; _id = org + NUL + name, written create-only, so two hosts creating the
   * same name at once cannot both succeed.
   */
  dataset_names: { org: keyword, name: keyword, dataset_id: keyword },
  /** Installation-wide values (server key, operator token prefix); _id = key, create-only. */
  meta: { value: { type: 'keyword', index: false } },
  /** Request credits per organisation and UTC month; _id = org + NUL + yyyymm. */
  credits: {
    org: keyword,
    ym: { type: 'integer' },
    micro: long,
    per: opaque,
    last_at: long,
    leases: opaque,
    write: { type: 'keyword', index: false },
  },
  /** One document per counted image (create-only, so redelivery never counts twice). */
  images: {
    org: keyword,
    year: { type: 'integer' },
    dataset_id: keyword,
    item_id: keyword,
    url: { type: 'keyword', index: false },
    at: long,
    /** The reservation this count fulfilled (see image_holds). */
    hold: keyword,
  },
  /** Places held in a fixed image allowance before download; _id = org + NUL + year. */
  image_holds: { org: keyword, year: { type: 'integer' }, holds: opaque },
  /** The event log: billable requests with their `v`, and later tracked events. */
  events: {
    org: keyword,
    dataset_id: keyword,
    kind: keyword,
    type: keyword,
    at: { type: 'date', format: 'epoch_millis' },
    vars: { type: 'flattened' },
    // what the analytics report aggregates (contract §11); see domain/report
    total: { type: 'integer' },
    filters: keyword,
    sort: keyword,
    shown: keyword,
    page_view_id: keyword,
    item_id: keyword,
    // contract §14: what a counted event (click or purchase naming an item) adds to its item,
    // and when a host received it (the popularity roll-up's "new since the last pass")
    qty: { type: 'integer' },
    received_at: long,
  },
  /**
   * Each item id's last rolled-up popularity and purchases (contract §14), also for ids not in
   * the dataset (yet): an item pushed later starts from them. _id = dataset id + NUL + item id.
   */
  item_counts: {
    dataset_id: keyword,
    item_id: keyword,
    popularity: long,
    purchases: long,
    at: long,
  },
  /**
   * Where the popularity roll-up is; one document (_id `state`), written with if_seq_no: the
   * time up to which received events are counted, the window edge applied, when the last pass
   * ran, and until when a process has claimed the current pass.
   */
  counts_rollup: { watermark: long, edge: long, ran_at: long, claim_until: long },
  /**
   * Requests admitted per rate key in one 60-s window (contract §16 `rate`); _id = key + NUL +
   * window start, written with if_seq_no. `window` is indexed for the sweep of past windows.
   */
  rates: { key: { type: 'keyword', ignore_above: 256 }, window: long, n: { type: 'integer' } },
  /**
   * Registered webhooks (contract §17), one document per organisation (_id = org) holding all
   * of its webhooks, so the per-organisation cap is one versioned write (EsWebhookStore).
   * `hook_ids` finds the organisation of a webhook id.
   */
  webhooks: { org: keyword, hook_ids: keyword, hooks: opaque },
  /**
   * Item facts not yet batched into deliveries, written create-only: `facts` holds those a
   * worker wrote together (_id names them); the other fields are a fact of its own (_id = its
   * id), as an earlier release wrote them.
   */
  webhook_facts: {
    facts: opaque,
    count: { type: 'integer' },
    org: keyword,
    dataset_id: keyword,
    kind: keyword,
    item_id: keyword,
    at: long,
    error: opaque,
  },
  /** Webhook deliveries and their attempts; _id = delivery id, every change with if_seq_no. */
  webhook_deliveries: {
    id: keyword,
    webhook_id: keyword,
    org: keyword,
    type: keyword,
    // the signed JSON may exceed a keyword's 32 KB doc value: kept in _source only
    body: { type: 'keyword', index: false, doc_values: false },
    state: keyword,
    attempts: { type: 'integer' },
    last_status: { type: 'integer' },
    last_error: { type: 'keyword', index: false, doc_values: false },
    next_attempt_at: long,
    claim_until: long,
    claim: keyword,
    created_at: long,
    manual: { type: 'boolean' },
  },
  /**
   * The outbox's small shared state; _id = `batcher` (the batching lease), `ds:<dataset>` (its
   * last-seen status) or `mark:<key>` (a create-only marker).
   */
  outbox_state: {
    owner: keyword,
    claim_until: long,
    status: keyword,
    epoch: { type: 'integer' },
    at: long,
  },
  /**
   * The near-duplicate report (contract §18), by `kind`: `entry` (an item's neighbours; _id =
   * e NUL dataset NUL item), `dismissal` (_id = d NUL dataset NUL key, create-only), `state`
   * (a dataset's pass state; _id = s NUL dataset) and `lease` (_id = lease, with if_seq_no).
   */
  duplicates: {
    kind: keyword,
    dataset_id: keyword,
    item_id: keyword,
    processed_at: long,
    neighbours: opaque,
    ids: keyword,
    watermark: long,
    computed_at: long,
    embedder: keyword,
    pass_started: long,
    pass_after: keyword,
    pass_embedder: keyword,
    owner: keyword,
    claim_until: long,
  },
  /**
   * Tuned similarity (contract §20), by `kind`: `model` (a fitted projection, float32 bytes in
   * base64; _id = m NUL dataset NUL model id, create-only) and `lease` (_id = lease).
   */
  tuning: {
    kind: keyword,
    dataset_id: keyword,
    bytes: { type: 'binary' },
    created_at: long,
    owner: keyword,
    claim_until: long,
  },
} as const;

export type SharedIndex = keyof typeof SHARED;

/**
 * The event log is analytics, not billing: its writes are fsynced every second instead of one
 * by one (the per-write fsync was most of what request logging cost, docs/engines.md). A crash of every copy of its shard loses at most that second of events. Credits,
 * images, accounts and items keep the default, fsynced before a write is acknowledged.
 */
const EVENT_LOG_SETTINGS = { 'translog.durability': 'async', 'translog.sync_interval': '1s' };

/**
 * A scoped token's per-minute counts likewise: a crash of every copy of the shard forgets at
 * most a second of them (a few more requests admitted that minute), and no request waits for
 * an fsync to be admitted.
 */
const RATE_SETTINGS = EVENT_LOG_SETTINGS;

/**
 * The image counts are only ever read by the ledger's count, which refreshes the index itself
 * first (a count must be exact). Background refreshes made nothing visible that anyone read,
 * yet for 30 s after the index was made or last counted they ran every second while workers
 * wrote, each costing tens of milliseconds of refresh time.
 */
const IMAGE_COUNT_SETTINGS = { refresh_interval: '-1' };

/** Settings a shared index is made with, where they differ from Elasticsearch's defaults. */
const CREATED_WITH: Partial<Record<SharedIndex, Record<string, unknown>>> = {
  events: EVENT_LOG_SETTINGS,
};

/**
 * Dynamic settings a shared index is kept at: made with them, and an index made by an earlier
 * release takes them at the next start.
 */
const KEPT_AT: Partial<Record<SharedIndex, Record<string, unknown>>> = {
  images: IMAGE_COUNT_SETTINGS,
  // every search of these refreshes the index itself first (EsEventOutbox, EsWebhookStore,
  // EsDuplicateStore)
  webhook_facts: IMAGE_COUNT_SETTINGS,
  webhook_deliveries: IMAGE_COUNT_SETTINGS,
  webhooks: IMAGE_COUNT_SETTINGS,
  duplicates: IMAGE_COUNT_SETTINGS,
  rates: RATE_SETTINGS,
};

/**
 * Every index name of one installation, and their lifecycle. Every Elasticsearch adapter gets
 * its names from here, so the prefix (two installations on one cluster) and the layout are
 * applied in one place. Nothing here caches whether an index exists: another host may have
 * created or deleted it.
 */
export class EsIndices {
  constructor(
    readonly client: Client,
    readonly prefix: string,
    readonly layout: IndexLayout = { shards: 1, replicas: 1 },
  ) {}

  shared(name: SharedIndex): string {
    return `${this.prefix}${name.replaceAll('_', '-')}`;
  }

  items(datasetId: string): string {
    return `${this.prefix}items-${datasetId}`;
  }

  get allItems(): string {
    return `${this.prefix}items-*`;
  }

  settings(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      number_of_shards: this.layout.shards,
      number_of_replicas: this.layout.replicas,
      ...extra,
    };
  }

  /**
   * Creates the shared indices that do not exist yet (every process does this at start), and
   * adds fields a newer version maps to those that do: adding a field is idempotent, and with
   * `dynamic: strict` a document carrying an unmapped field would be refused.
   */
  async ensureShared(): Promise<void> {
    await Promise.all(
      (Object.keys(SHARED) as SharedIndex[]).map(async (name) => {
        const mappings = { dynamic: 'strict', properties: SHARED[name] };
        const index = this.shared(name);
        const kept = KEPT_AT[name];
        if (await this.create(index, mappings, { ...CREATED_WITH[name], ...kept })) return;
        await this.client.indices.putMapping({ index, properties: SHARED[name] as never });
        if (kept) await this.keep(index, kept);
      }),
    );
  }

  private readonly itemSettings = {
    // Elasticsearch's default. Client writes ask for their own refresh (Refresher); workers'
    // results, which nobody waits for, are searchable within a second.
    refresh_interval: '1s',
    // a metadata array may hold up to 1,000 values per field
    'mapping.nested_objects.limit': 100_000,
  };

  /** The item index of a dataset, with the mapping for vectors of `dims`. */
  async createItems(datasetId: string, dims: number): Promise<void> {
    await this.create(this.items(datasetId), itemMapping(dims), this.itemSettings);
  }

  /**
   * An index template for item indices. Elasticsearch creates a missing index on a write by
   * default: a late write for a dataset another host just deleted (a worker's result, written
   * against the version it read before the download) would make an empty index nobody deletes.
   * The template forbids that (`allow_auto_create: false`): such a write answers
   * index_not_found, which every writer here treats as "the dataset is gone" or creates the
   * index itself first (EsItemWriter). An index made anyway gets the real mapping, so the sweeps
   * that sort every item index by `dataset` keep working.
   */
  async ensureItemTemplate(dims: number): Promise<void> {
    await this.client.indices.putIndexTemplate({
      name: `${this.prefix}items`,
      index_patterns: [this.allItems],
      allow_auto_create: false,
      template: {
        settings: { index: this.settings(this.itemSettings) },
        mappings: itemMapping(dims) as never,
      },
    });
    // Indices made before the embedding had its compact stored copy (or the counts, or the
    // pixel hash) take the fields now, so no write is refused by their strict mapping (a no-op
    // once there).
    await this.client.indices.putMapping({
      index: this.allItems,
      properties: {
        ...EMBEDDING_SOURCE_MAPPING,
        ...COUNTS_MAPPING,
        ...DUPLICATES_MAPPING,
        ...TUNED_MAPPING,
      } as never,
      allow_no_indices: true,
      ignore_unavailable: true,
    });
    // Indices made with the former 250 ms interval take the current one (a no-op after).
    await this.keep(this.allItems, { refresh_interval: this.itemSettings.refresh_interval });
  }

  /** Brings existing indices (a name or a pattern; none is fine) to dynamic `settings`. */
  private async keep(index: string, settings: Record<string, unknown>): Promise<void> {
    await this.client.indices.putSettings({
      index,
      settings: { index: settings },
      allow_no_indices: true,
      ignore_unavailable: true,
    });
  }

  /**
   * Create-if-absent: another host may create the same index at the same moment. True when
   * this call created it.
   */
  private async create(
    index: string,
    mappings: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ): Promise<boolean> {
    try {
      await this.client.indices.create({
        index,
        settings: { index: this.settings(extra) },
        mappings: mappings as never,
        // the call returns once the primaries can take writes (not all replicas)
        wait_for_active_shards: 1,
      });
      return true;
    } catch (e) {
      if (isAlreadyExists(e)) return false;
      throw e;
    }
  }
}

const isAlreadyExists = (e: unknown): boolean =>
  e instanceof errors.ResponseError && e.body?.error?.type === 'resource_already_exists_exception';

export const isNotFound = (e: unknown): boolean =>
  e instanceof errors.ResponseError && e.statusCode === 404;

export const isConflict = (e: unknown): boolean =>
  e instanceof errors.ResponseError && e.statusCode === 409;
