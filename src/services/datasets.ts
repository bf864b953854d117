import crypto from 'node:crypto';
import { AppError } from '../domain/errors';
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
import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { AuthService } from './auth';
import type { RequestContext } from './principal';
import { browseToken } from './tokens';

export interface DatasetView {
  name: string;
  browse_token: string;
  content_url: string;
  processing_errors_url: string;
  settings: DatasetSettings;
  status: 'pending' | 'published';
  created_at: string;
  counts: DatasetCounts;
}

/**
 * The embedder a dataset's vectors are made with; `reprocessing` counts processed items still
 * waiting for a vector from it (after an embedder change). Not in the REST dataset object,
 * whose shape contract §3 fixes.
 */
export type EmbedderStatus = EmbedderRef & { reprocessing: number };

export const datasetPath = (org: string, name: string): string =>
  `/orgs/${encodeURIComponent(org)}/datasets/${encodeURIComponent(name)}`;

export class DatasetService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly content: ContentStore,
    private readonly auth: AuthService,
    private readonly serverKey: Buffer,
    private readonly clock: () => Date,
    /** Recorded on new datasets; workers re-embed datasets made with another one. */
    private readonly embedder: EmbedderRef,
  ) {}

  private async browseTokenOf(ds: Dataset): Promise<string> {
    const rotation = await this.accounts.browseRotation(ds.id);
    return browseToken(this.serverKey, ds.org, ds.id, rotation, this.clock()).token;
  }

  async view(ctx: RequestContext, ds: Dataset): Promise<DatasetView> {
    const counts = await this.content.counts(ds.id);
    const base = `${ctx.baseUrl}${datasetPath(ds.org, ds.name)}`;
    return {
      name: ds.name,
      browse_token: await this.browseTokenOf(ds),
      content_url: `${base}/content`,
      processing_errors_url: `${base}/errors`,
      settings: ds.settings,
      status: statusOf(counts),
      created_at: ds.createdAt,
      counts,
    };
  }

  async embedderStatus(ctx: RequestContext, org: string, name: string): Promise<EmbedderStatus> {
    const ds = await this.auth.adminDataset(ctx.principal, org, name);
    const embedder = ds.embedder ?? this.embedder;
    const reprocessing = await this.content.staleEmbeddingCount(ds.id, embedder.id);
    return { id: embedder.id, dimensions: embedder.dimensions, reprocessing };
  }

  async create(
    ctx: RequestContext,
    org: string,
    body: unknown,
  ): Promise<{ dataset_url: string; dataset: DatasetView }> {
    await this.auth.requireOrgAdmin(ctx.principal, org);
    const name = assertDatasetName((body as { name?: unknown } | null)?.name);
    const now = this.clock();
    const ds: Dataset = {
      id: crypto.randomUUID(),
      org,
      name,
      settings: { fields: {}, version: 1 },
      createdAt: now.toISOString(),
      embedder: this.embedder,
    };
    if (!(await this.accounts.createDataset(ds)))
      throw new AppError('conflict', `dataset '${name}' already exists`);
    await this.accounts.putToken(browseToken(this.serverKey, org, ds.id, 0, now).record);
    return {
      dataset_url: `${ctx.baseUrl}${datasetPath(org, name)}`,
      dataset: await this.view(ctx, ds),
    };
  }

  async list(ctx: RequestContext, org: string): Promise<DatasetView[]> {
    await this.auth.requireOrgAdmin(ctx.principal, org);
    const all = await this.accounts.listDatasets(org);
    return Promise.all(all.map((ds) => this.view(ctx, ds)));
  }

  async get(ctx: RequestContext, org: string, name: string): Promise<DatasetView> {
    return this.view(ctx, await this.auth.adminDataset(ctx.principal, org, name));
  }

  /** Permanent: content is dropped and the browse token stops working; usage keeps the name. */
  async delete(ctx: RequestContext, org: string, name: string): Promise<void> {
    const ds = await this.auth.adminDataset(ctx.principal, org, name);
    await this.accounts.markDatasetDeleted(ds.id, this.clock().toISOString());
    await this.content.dropDataset(ds.id);
  }

  async rotateBrowseToken(ctx: RequestContext, org: string, name: string): Promise<DatasetView> {
    const ds = await this.auth.adminDataset(ctx.principal, org, name);
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
    return this.view(ctx, ds);
  }

  async setEnabledFields(
    ctx: RequestContext,
    org: string,
    name: string,
    body: unknown,
  ): Promise<DatasetView> {
    const ds = await this.auth.adminDataset(ctx.principal, org, name);
    const fields = parseEnabledFields(body);
    if (sameFields(fields, ds.settings.fields)) return this.view(ctx, ds);
    const version = await this.accounts.updateEnabledFields(ds.id, fields);
    return this.view(ctx, { ...ds, settings: { fields, version } });
  }
}
