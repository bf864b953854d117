import type { Dataset, EmbedderRef, EnabledFields } from '../domain/dataset';
import type { Plan } from '../domain/plan';
import type { SimilaritySettings } from '../domain/tuning/settings';

export interface Organisation {
  name: string;
  plan: Plan;
  createdAt: string;
}

export type TokenKind = 'op' | 'org' | 'ds';

export interface TokenRecord {
  prefix: string;
  kind: TokenKind;
  org?: string;
  datasetId?: string;
  /** sha256 of the whole token; the token itself is never stored. */
  hash: string;
  createdAt: string;
}

/** Organisations, tokens and datasets: the control plane. */
export interface AccountStore {
  createOrg(org: Organisation): Promise<boolean>;
  getOrg(name: string): Promise<Organisation | undefined>;
  /** Replaces an organisation's plan; false when there is no such organisation. */
  updatePlan(name: string, plan: Plan): Promise<boolean>;

  putToken(token: TokenRecord): Promise<void>;
  findToken(prefix: string): Promise<TokenRecord | undefined>;
  listTokens(org: string): Promise<TokenRecord[]>;
  /** Revokes one of the organisation's org tokens. */
  deleteToken(org: string, prefix: string): Promise<boolean>;
  /** Revokes any token by prefix (browse-token rotation). */
  removeToken(prefix: string): Promise<void>;

  /** False when a live dataset of that name exists in the organisation. */
  createDataset(ds: Dataset): Promise<boolean>;
  /**
   * Records `embedder` on every live dataset that was made with another one (or none) and
   * returns those datasets, with the embedder they had: their items are then re-processed.
   */
  adoptEmbedder(embedder: EmbedderRef): Promise<Array<Dataset & { previous?: EmbedderRef }>>;
  getDataset(org: string, name: string): Promise<Dataset | undefined>;
  getDatasetById(id: string): Promise<Dataset | undefined>;
  listDatasets(org: string): Promise<Dataset[]>;
  /** Names of deleted datasets still reported by usage. */
  listDeletedDatasets(org: string): Promise<Dataset[]>;
  /** Every live dataset of the installation (background passes over all of them). */
  liveDatasets(): Promise<Dataset[]>;
  markDatasetDeleted(id: string, at: string): Promise<void>;
  /** Replaces the enabled fields and bumps the version; returns the new version. */
  updateEnabledFields(id: string, fields: EnabledFields): Promise<number>;
  /**
   * Read-modify-write of the dataset's similarity setting (contract §20), atomic against every
   * other writer; `change` returns undefined to leave it. The setting as stored after, or
   * undefined when the dataset is gone.
   */
  updateSimilarity(
    id: string,
    change: (current: SimilaritySettings) => SimilaritySettings | undefined,
  ): Promise<SimilaritySettings | undefined>;
  /** Counter mixed into the browse token; +1 revokes the previous one. */
  browseRotation(id: string): Promise<number>;
  bumpBrowseRotation(id: string): Promise<number>;

  getMeta(key: string): Promise<string | undefined>;
  /**
   * Stores `value` under `key` unless a value is there already, and returns the stored one:
   * of several processes claiming at once, exactly one wins and all see its value.
   */
  claimMeta(key: string, value: string): Promise<string>;
  ping(): Promise<void>;
}
