import crypto from 'node:crypto';
import { AppError, invalid } from '../domain/errors';
import {
  parseEnabledFields,
  sameFields,
  statusOf,
  type Dataset,
  type DatasetCounts,
  type DatasetSettings,
  type EmbedderRef,
} from '../domain/dataset';
import { assertDatasetName } from '../domain/names';
import {
  TUNING_OFF,
  checkSimilarityInput,
  requested,
  type SimilaritySettings,
} from '../domain/tuning/settings';
import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { DuplicateStore } from '../ports/duplicate-store';
import type { AuthService } from './auth';
import type { Principal } from './principal';
import { browseToken } from './tokens';
import { mintScoped } from './scoped-tokens';
import { checkPayload } from './scope-payload';
import { parseQ } from '../query/parse';
import { resolveFilters } from '../query/resolve';

/** A dataset as its organisation sees it; transports add their links (contract §3). */
export interface DatasetView {
  org: string;
  name: string;
  browseToken: string;
  settings: DatasetSettings;
  /** Tuned similarity (contract §20), `off` until set. */
  similarity: SimilaritySettings;
  status: 'pending' | 'published';
  createdAt: string;
  counts: DatasetCounts;
}

/**
 * The embedder a dataset's vectors are made with; `reprocessing` counts processed items still
 * waiting for a vector from it (after an embedder change). Not in the REST dataset object,
 * whose shape contract §3 fixes.
 */
export type EmbedderStatus = EmbedderRef & { reprocessing: number };

/** Array fields and the values of each enabled for q; `["*"]` enables every value. */
export type EnabledFieldsInput = Readonly<Record<string, ReadonlyArray<string | number>>>;

export class DatasetService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly content: ContentStore,
    private readonly auth: AuthService,
    private readonly serverKey: Buffer,
    private readonly clock: () => Date,
    /** Recorded on new datasets; workers re-embed datasets made with another one. */
    private readonly embedder: EmbedderRef,
    /** The duplicate report's state, forgotten with the dataset (contract §18). */
    private readonly duplicates: Pick<DuplicateStore, 'dropDataset'>,
    /** Where a dataset's array fields are enabled, named in errors about a token's q. */
    private readonly settingsAt: (org: string, name: string) => string = () => 'settings/fields',
  ) {}

  /** The dataset with its current rotation (a realtime read): what scoped keys derive from. */
  private async current(p: Principal, org: string, name: string): Promise<Dataset> {
    const ds = await this.auth.adminDataset(p, org, name);
    return { ...ds, browseRotation: await this.accounts.browseRotation(ds.id) };
  }

  /** The key a shop's server signs scoped tokens with (contract §16). */
  async scopedKey(p: Principal, org: string, name: string): Promise<string> {
    return this.auth.scopedKey(await this.current(p, org, name));
  }

  /**
   * A scoped token signed here, for integrations that do not hold the key: the payload is
   * checked as a request would use it — its q against the dataset's fields, exp not past.
   */
  async mintScopedToken(p: Principal, org: string, name: string, raw: unknown): Promise<string> {
    const ds = await this.current(p, org, name);
    const payload = checkPayload(raw);
    if (payload.exp !== undefined && payload.exp * 1000 <= this.clock().getTime())
      throw invalid(`exp ${payload.exp} is in the past`, [
        { field: 'exp', message: 'in the past' },
      ]);
    if (payload.q) {
      const filters = parseQ(payload.q);
      const catalogue = await this.content.catalogue(ds.id);
      try {
        resolveFilters(filters, {
          enabled: ds.settings.fields,
          catalogue,
          settingsPath: this.settingsAt(org, name),
        });
      } catch (e) {
        throw invalid(`q: ${(e as Error).message}`, [
          { field: 'q', message: (e as Error).message },
        ]);
      }
    }
    return mintScoped(this.auth.scopedKey(ds), payload);
  }

  private async browseTokenOf(ds: Dataset): Promise<string> {
    const rotation = await this.accounts.browseRotation(ds.id);
    return browseToken(this.serverKey, ds.org, ds.id, rotation, this.clock()).token;
  }

  async view(ds: Dataset): Promise<DatasetView> {
    const counts = await this.content.counts(ds.id);
    return {
      org: ds.org,
      name: ds.name,
      browseToken: await this.browseTokenOf(ds),
      settings: ds.settings,
      similarity: ds.similarity ?? TUNING_OFF,
      status: statusOf(counts),
      createdAt: ds.createdAt,
      counts,
    };
  }

  async embedderStatus(p: Principal, org: string, name: string): Promise<EmbedderStatus> {
    const ds = await this.auth.adminDataset(p, org, name);
    const embedder = ds.embedder ?? this.embedder;
    const reprocessing = await this.content.staleEmbeddingCount(ds.id, embedder.id);
    return { id: embedder.id, dimensions: embedder.dimensions, reprocessing };
  }

  async create(p: Principal, org: string, cmd: { name: string }): Promise<DatasetView> {
    await this.auth.requireOrgAdmin(p, org);
    const name = assertDatasetName(cmd.name);
    const now = this.clock();
    const ds: Dataset = {
      id: crypto.randomUUID(),
      org,
      name,
      settings: { fields: {}, version: 1 },
      createdAt: now.toISOString(),
      browseRotation: 0,
      embedder: this.embedder,
    };
    if (!(await this.accounts.createDataset(ds)))
      throw new AppError('conflict', `dataset '${name}' already exists`);
    await this.accounts.putToken(browseToken(this.serverKey, org, ds.id, 0, now).record);
    return this.view(ds);
  }

  async list(p: Principal, org: string): Promise<DatasetView[]> {
    await this.auth.requireOrgAdmin(p, org);
    const all = await this.accounts.listDatasets(org);
    return Promise.all(all.map((ds) => this.view(ds)));
  }

  async get(p: Principal, org: string, name: string): Promise<DatasetView> {
    return this.view(await this.auth.adminDataset(p, org, name));
  }

  /** Permanent: content is dropped and the browse token stops working; usage keeps the name. */
  async delete(p: Principal, org: string, name: string): Promise<void> {
    const ds = await this.auth.adminDataset(p, org, name);
    await this.accounts.markDatasetDeleted(ds.id, this.clock().toISOString());
    await this.content.dropDataset(ds.id);
    await this.duplicates.dropDataset(ds.id);
  }

  async rotateBrowseToken(p: Principal, org: string, name: string): Promise<DatasetView> {
    const ds = await this.auth.adminDataset(p, org, name);
    const now = this.clock();
    const old = browseToken(
      this.serverKey,
      org,
      ds.id,
      await this.accounts.browseRotation(ds.id),
      now,
    );
    const rotation = await this.accounts.bumpBrowseRotation(ds.id);
    await this.accounts.putToken(browseToken(this.serverKey, org, ds.id, rotation, now).record);
    await this.accounts.removeToken(old.record.prefix);
    return this.view({ ...ds, browseRotation: rotation });
  }

  async setEnabledFields(
    p: Principal,
    org: string,
    name: string,
    input: EnabledFieldsInput,
  ): Promise<DatasetView> {
    const ds = await this.auth.adminDataset(p, org, name);
    const fields = parseEnabledFields(input);
    if (sameFields(fields, ds.settings.fields)) return this.view(ds);
    const version = await this.accounts.updateEnabledFields(ds.id, fields);
    return this.view({ ...ds, settings: { fields, version } });
  }

  /**
   * Sets what similarity learns from (contract §20): a new field or weight is fitted in the
   * background (`fitting`), null switches tuning off at once.
   */
  async setSimilarity(
    p: Principal,
    org: string,
    name: string,
    /** `learnFrom` left out (GraphQL) keeps the current field. */
    input: { learnFrom?: string | null; weight?: number | null },
  ): Promise<DatasetView> {
    const ds = await this.auth.adminDataset(p, org, name);
    const wanted = checkSimilarityInput({
      learnFrom: input.learnFrom ?? null,
      weight: input.weight,
    });
    const similarity = await this.accounts.updateSimilarity(ds.id, (cur) =>
      requested(
        cur,
        input.learnFrom === undefined ? { ...wanted, learnFrom: cur.learnFrom } : wanted,
      ),
    );
    if (!similarity) throw new AppError('not_found', `dataset '${name}' not found`);
    return this.view({ ...ds, similarity });
  }
}
