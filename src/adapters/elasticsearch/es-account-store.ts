import { TUNING_OFF, type SimilaritySettings } from '../../domain/tuning/settings';
import type { Dataset, EmbedderRef, EnabledFields } from '../../domain/dataset';
import { AppError } from '../../domain/errors';
import type { Plan } from '../../domain/plan';
import type { AccountStore, Organisation, TokenRecord } from '../../ports/account-store';
import { casUpdate, claimValue, createOnly, getVersioned } from './cas';
import { unavailable } from './outage';
import { isNotFound, type EsIndices } from './indices';
import { RecentReads } from '../../lib/recent-reads';

interface OrgDoc {
  name: string;
  plan: Plan;
  created_at: string;
}

interface TokenDoc {
  kind: TokenRecord['kind'];
  org?: string;
  dataset_id?: string;
  hash: string;
  created_at: string;
}

interface DatasetDoc {
  org: string;
  name: string;
  fields: EnabledFields;
  settings_version: number;
  browse_rotation: number;
  created_at: string;
  deleted_at?: string;
  embedder?: string;
  embedder_dims?: number;
  similarity?: SimilaritySettings;
}

interface NameDoc {
  org: string;
  name: string;
  dataset_id: string;
}

const toDataset = (id: string, d: DatasetDoc): Dataset => ({
  id,
  org: d.org,
  name: d.name,
  settings: { fields: d.fields, version: d.settings_version },
  createdAt: d.created_at,
  browseRotation: d.browse_rotation ?? 0,
  ...(d.embedder && d.embedder_dims
    ? { embedder: { id: d.embedder, dimensions: d.embedder_dims } }
    : {}),
  ...(d.similarity ? { similarity: d.similarity } : {}),
});

const toToken = (prefix: string, t: TokenDoc): TokenRecord => ({
  prefix,
  kind: t.kind,
  ...(t.org ? { org: t.org } : {}),
  ...(t.dataset_id ? { datasetId: t.dataset_id } : {}),
  hash: t.hash,
  createdAt: t.created_at,
});

/** Deleted by another request between the caller's read and this write. */
const goneDataset = (): AppError => new AppError('not_found', 'dataset not found');

/** Control-plane lists are small; one page holds them all. */
const MAX_LIST = 10_000;

/** Half the 2 s in which a revocation must reach every host (contract §12). */
const RECENT_MS = 1000;

/**
 * Organisations, tokens and datasets in Elasticsearch, shared by every process (contract §12).
 * Reads by id are realtime, so a token or dataset made on one host is seen on another at
 * once; lists refresh before they search, so they see every write made before them.
 * Every read-modify-write carries the version it read; names are claimed create-only.
 *
 * A token read by prefix (every request's first read) keeps what it found for {@link RECENT_MS}:
 * a revocation made on another host is seen here within that (contract §12: within 2 s), and
 * this host's own token writes at once. Datasets are not kept: their settings must be the same on
 * every host at once.
 */
export class EsAccountStore implements AccountStore {
  private readonly recentTokens: RecentReads<TokenRecord>;

  constructor(
    private readonly indices: EsIndices,
    now: () => number = Date.now,
  ) {
    this.recentTokens = new RecentReads(RECENT_MS, now);
  }

  /** A write to a kept record: forgotten before (reads from now on) and after (reads during). */
  private async changing<T>(
    recent: Pick<RecentReads<unknown>, 'forget' | 'clear'>,
    key: string | undefined,
    write: () => Promise<T>,
  ): Promise<T> {
    const forget = () => (key === undefined ? recent.clear() : recent.forget(key));
    forget();
    try {
      return await write();
    } finally {
      forget();
    }
  }

  private get client() {
    return this.indices.client;
  }

  /**
   * Lists are searches, which see what was refreshed: refreshing first makes them exact right
   * after a write on any host. Cheaper than making every write wait for a refresh, and lists
   * are rare admin calls.
   */
  private async searchable(index: string): Promise<string> {
    await this.client.indices.refresh({ index });
    return index;
  }

  private async get<T>(index: string, id: string): Promise<T | undefined> {
    return (await getVersioned<T>(this.client, index, id))?.doc;
  }

  async createOrg(org: Organisation): Promise<boolean> {
    return createOnly(this.client, this.indices.shared('orgs'), org.name, {
      name: org.name,
      plan: org.plan,
      created_at: org.createdAt,
    } satisfies OrgDoc);
  }

  async getOrg(name: string): Promise<Organisation | undefined> {
    const o = await this.get<OrgDoc>(this.indices.shared('orgs'), name);
    return o && { name: o.name, plan: o.plan, createdAt: o.created_at };
  }

  async updatePlan(name: string, plan: Plan): Promise<boolean> {
    // A whole-document write: a partial update would merge the old plan's keys into the new.
    return (
      await casUpdate<OrgDoc>(
        this.client,
        this.indices.shared('orgs'),
        name,
        (o) => o && { ...o, plan },
        { what: `organisation '${name}'` },
      )
    ).written;
  }

  putToken(t: TokenRecord): Promise<void> {
    return this.changing(this.recentTokens, t.prefix, () => this.writeToken(t));
  }

  private async writeToken(t: TokenRecord): Promise<void> {
    await this.client.index({
      index: this.indices.shared('tokens'),
      id: t.prefix,
      document: {
        kind: t.kind,
        ...(t.org ? { org: t.org } : {}),
        ...(t.datasetId ? { dataset_id: t.datasetId } : {}),
        hash: t.hash,
        created_at: t.createdAt,
      } satisfies TokenDoc,
    });
  }

  findToken(prefix: string): Promise<TokenRecord | undefined> {
    return this.recentTokens.get(prefix, async () => {
      const t = await this.get<TokenDoc>(this.indices.shared('tokens'), prefix);
      return t && toToken(prefix, t);
    });
  }

  async listTokens(org: string): Promise<TokenRecord[]> {
    const r = await this.client.search<TokenDoc>({
      index: await this.searchable(this.indices.shared('tokens')),
      query: { bool: { filter: [{ term: { org } }, { term: { kind: 'org' } }] } },
      sort: [{ created_at: 'asc' }],
      size: MAX_LIST,
    });
    return r.hits.hits.map((h) => toToken(h._id!, h._source!));
  }

  deleteToken(org: string, prefix: string): Promise<boolean> {
    return this.changing(this.recentTokens, prefix, () => this.deleteOrgToken(org, prefix));
  }

  private async deleteOrgToken(org: string, prefix: string): Promise<boolean> {
    const index = this.indices.shared('tokens');
    const cur = await getVersioned<TokenDoc>(this.client, index, prefix);
    if (!cur || cur.doc.org !== org || cur.doc.kind !== 'org') return false;
    try {
      await this.client.delete({
        index,
        id: prefix,
        if_seq_no: cur.seqNo,
        if_primary_term: cur.primaryTerm,
      });
      return true;
    } catch (e) {
      // Deleted (or replaced) by another request in between: not ours to report as done.
      if (isNotFound(e)) return false;
      throw e;
    }
  }

  removeToken(prefix: string): Promise<void> {
    return this.changing(this.recentTokens, prefix, async () => {
      await this.client.delete(
        { index: this.indices.shared('tokens'), id: prefix },
        { ignore: [404] },
      );
    });
  }

  private nameId(org: string, name: string): string {
    return `${org}:${name}`;
  }

  async createDataset(ds: Dataset): Promise<boolean> {
    const datasets = this.indices.shared('datasets');
    // The record first, then the name: a crash in between leaves an unnamed record that no
    // read can reach, never a name pointing at nothing.
    await this.client.index({
      index: datasets,
      id: ds.id,
      document: {
        org: ds.org,
        name: ds.name,
        fields: ds.settings.fields,
        settings_version: ds.settings.version,
        browse_rotation: 0,
        created_at: ds.createdAt,
        ...(ds.embedder ? { embedder: ds.embedder.id, embedder_dims: ds.embedder.dimensions } : {}),
      } satisfies DatasetDoc,
    });
    const claimed = await createOnly(
      this.client,
      this.indices.shared('dataset_names'),
      this.nameId(ds.org, ds.name),
      { org: ds.org, name: ds.name, dataset_id: ds.id } satisfies NameDoc,
    );
    if (!claimed) await this.client.delete({ index: datasets, id: ds.id }, { ignore: [404] });
    return claimed;
  }

  adoptEmbedder(embedder: EmbedderRef): Promise<Array<Dataset & { previous?: EmbedderRef }>> {
    return this.adopt(embedder);
  }

  private async adopt(embedder: EmbedderRef): Promise<Array<Dataset & { previous?: EmbedderRef }>> {
    const index = this.indices.shared('datasets');
    const r = await this.client.search<DatasetDoc>({
      index: await this.searchable(index),
      query: {
        bool: {
          must_not: [
            { exists: { field: 'deleted_at' } },
            {
              bool: {
                filter: [
                  { term: { embedder: embedder.id } },
                  { term: { embedder_dims: embedder.dimensions } },
                ],
              },
            },
          ],
        },
      },
      size: MAX_LIST,
      _source: false,
    });
    const out: Array<Dataset & { previous?: EmbedderRef }> = [];
    for (const h of r.hits.hits) {
      let previous: EmbedderRef | undefined;
      const { doc, written } = await casUpdate<DatasetDoc>(
        this.client,
        index,
        h._id!,
        (d) => {
          if (!d || d.deleted_at) return undefined;
          if (d.embedder === embedder.id && d.embedder_dims === embedder.dimensions)
            return undefined;
          previous =
            d.embedder && d.embedder_dims
              ? { id: d.embedder, dimensions: d.embedder_dims }
              : undefined;
          return { ...d, embedder: embedder.id, embedder_dims: embedder.dimensions };
        },
        { what: 'a dataset' },
      );
      if (written && doc)
        out.push({ ...toDataset(h._id!, doc), ...(previous ? { previous } : {}) });
    }
    return out;
  }

  async getDataset(org: string, name: string): Promise<Dataset | undefined> {
    const n = await this.get<NameDoc>(this.indices.shared('dataset_names'), this.nameId(org, name));
    return n && this.byId(n.dataset_id);
  }

  private async byId(id: string): Promise<Dataset | undefined> {
    const d = await this.get<DatasetDoc>(this.indices.shared('datasets'), id);
    return d && !d.deleted_at ? toDataset(id, d) : undefined;
  }

  async getDatasetById(id: string): Promise<Dataset | undefined> {
    // Realtime, not kept: a settings change made on one host applies on every other at once.
    return this.byId(id);
  }

  async listDatasets(org: string): Promise<Dataset[]> {
    // The name index says which datasets are live; their records come by id (realtime).
    const names = await this.client.search<NameDoc>({
      index: await this.searchable(this.indices.shared('dataset_names')),
      query: { term: { org } },
      size: MAX_LIST,
    });
    const ids = names.hits.hits.map((h) => h._source!.dataset_id);
    if (!ids.length) return [];
    const r = await this.client.mget<DatasetDoc>({
      index: this.indices.shared('datasets'),
      ids,
    });
    // A record that cannot be read now (a shard recovering) is a 503, not a dataset missing
    // from the list.
    const unreadable = r.docs.find((d) => 'error' in d);
    if (unreadable)
      throw unavailable(
        `the search engine could not read dataset '${unreadable._id}'; try again shortly`,
      );
    return r.docs
      .flatMap((d) =>
        'found' in d && d.found && !d._source!.deleted_at ? [toDataset(d._id, d._source!)] : [],
      )
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async liveDatasets(): Promise<Dataset[]> {
    const r = await this.client.search<DatasetDoc>({
      index: await this.searchable(this.indices.shared('datasets')),
      query: { bool: { must_not: [{ exists: { field: 'deleted_at' } }] } },
      sort: [{ created_at: 'asc' }],
      size: MAX_LIST,
    });
    return r.hits.hits.map((h) => toDataset(h._id!, h._source!));
  }

  async listDeletedDatasets(org: string): Promise<Dataset[]> {
    const r = await this.client.search<DatasetDoc>({
      index: await this.searchable(this.indices.shared('datasets')),
      query: { bool: { filter: [{ term: { org } }, { exists: { field: 'deleted_at' } }] } },
      sort: [{ name: 'asc' }],
      size: MAX_LIST,
    });
    return r.hits.hits.map((h) => toDataset(h._id!, h._source!));
  }

  markDatasetDeleted(id: string, at: string): Promise<void> {
    // its tokens are deleted too: forget every kept token, not knowing their prefixes here
    return this.changing(this.recentTokens, undefined, () => this.markDeleted(id, at));
  }

  private async markDeleted(id: string, at: string): Promise<void> {
    const { doc } = await casUpdate<DatasetDoc>(
      this.client,
      this.indices.shared('datasets'),
      id,
      (d) => (d && !d.deleted_at ? { ...d, deleted_at: at } : undefined),
      { what: 'the dataset' },
    );
    if (!doc) return;
    const names = this.indices.shared('dataset_names');
    const nameId = this.nameId(doc.org, doc.name);
    const n = await getVersioned<NameDoc>(this.client, names, nameId);
    if (n?.doc.dataset_id === id)
      await this.client.delete(
        {
          index: names,
          id: nameId,
          if_seq_no: n.seqNo,
          if_primary_term: n.primaryTerm,
        },
        { ignore: [404, 409] },
      );
    // Its tokens stop working: the browse token is refused from now on, on every host.
    const tokens = await this.client.search({
      index: await this.searchable(this.indices.shared('tokens')),
      query: { term: { dataset_id: id } },
      size: MAX_LIST,
      _source: false,
    });
    if (tokens.hits.hits.length)
      await this.client.bulk({
        operations: tokens.hits.hits.map((h) => ({
          delete: { _index: this.indices.shared('tokens'), _id: h._id! },
        })),
      });
  }

  updateEnabledFields(id: string, fields: EnabledFields): Promise<number> {
    return this.writeFields(id, fields);
  }

  private async writeFields(id: string, fields: EnabledFields): Promise<number> {
    const { doc } = await casUpdate<DatasetDoc>(
      this.client,
      this.indices.shared('datasets'),
      id,
      (d) => d && { ...d, fields, settings_version: d.settings_version + 1 },
      { what: 'the dataset settings' },
    );
    if (!doc) throw goneDataset();
    return doc.settings_version;
  }

  async updateSimilarity(
    id: string,
    change: (current: SimilaritySettings) => SimilaritySettings | undefined,
  ): Promise<SimilaritySettings | undefined> {
    let kept: SimilaritySettings | undefined;
    const { doc } = await casUpdate<DatasetDoc>(
      this.client,
      this.indices.shared('datasets'),
      id,
      (d) => {
        if (!d) return undefined;
        const next = change(d.similarity ?? TUNING_OFF);
        kept = next ? undefined : (d.similarity ?? TUNING_OFF);
        return next && { ...d, similarity: next };
      },
      { what: 'the similarity setting' },
    );
    return doc?.similarity ?? kept;
  }

  async browseRotation(id: string): Promise<number> {
    return (await this.get<DatasetDoc>(this.indices.shared('datasets'), id))?.browse_rotation ?? 0;
  }

  async bumpBrowseRotation(id: string): Promise<number> {
    const { doc } = await casUpdate<DatasetDoc>(
      this.client,
      this.indices.shared('datasets'),
      id,
      (d) => d && { ...d, browse_rotation: d.browse_rotation + 1 },
      { what: 'the browse token' },
    );
    if (!doc) throw goneDataset();
    return doc.browse_rotation;
  }

  async getMeta(key: string): Promise<string | undefined> {
    return (await this.get<{ value: string }>(this.indices.shared('meta'), key))?.value;
  }

  async claimMeta(key: string, value: string): Promise<string> {
    return claimValue(this.client, this.indices.shared('meta'), key, value);
  }

  async ping(): Promise<void> {
    await this.client.cluster.health({ timeout: '2s' });
  }
}
