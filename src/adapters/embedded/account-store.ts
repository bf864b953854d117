import type { Dataset, EmbedderRef, EnabledFields } from '../../domain/dataset';
import type { Plan } from '../../domain/plan';
import { TUNING_OFF, type SimilaritySettings } from '../../domain/tuning/settings';
import type { AccountStore, Organisation, TokenRecord } from '../../ports/account-store';
import { type Db, stmt } from './db';

interface DatasetRow {
  id: string;
  org: string;
  name: string;
  fields: string;
  settings_version: number;
  created_at: string;
  browse_rotation: number;
  embedder: string | null;
  embedder_dims: number | null;
  similarity: string | null;
}

const toDataset = (r: DatasetRow): Dataset => ({
  id: r.id,
  org: r.org,
  name: r.name,
  settings: { fields: JSON.parse(r.fields) as EnabledFields, version: r.settings_version },
  createdAt: r.created_at,
  browseRotation: r.browse_rotation,
  ...(r.embedder !== null && r.embedder_dims !== null
    ? { embedder: { id: r.embedder, dimensions: r.embedder_dims } }
    : {}),
  ...(r.similarity ? { similarity: JSON.parse(r.similarity) as SimilaritySettings } : {}),
});

interface TokenRow {
  prefix: string;
  kind: TokenRecord['kind'];
  org: string | null;
  dataset_id: string | null;
  hash: string;
  created_at: string;
}

const toToken = (r: TokenRow): TokenRecord => ({
  prefix: r.prefix,
  kind: r.kind,
  ...(r.org ? { org: r.org } : {}),
  ...(r.dataset_id ? { datasetId: r.dataset_id } : {}),
  hash: r.hash,
  createdAt: r.created_at,
});

export class EmbeddedAccountStore implements AccountStore {
  constructor(private readonly db: Db) {}

  async createOrg(org: Organisation): Promise<boolean> {
    return (
      stmt(this.db, 'INSERT OR IGNORE INTO orgs (name, plan, created_at) VALUES (?, ?, ?)').run(
        org.name,
        JSON.stringify(org.plan),
        org.createdAt,
      ).changes === 1
    );
  }

  async updatePlan(name: string, plan: Plan): Promise<boolean> {
    return (
      stmt(this.db, 'UPDATE orgs SET plan = ? WHERE name = ?').run(JSON.stringify(plan), name)
        .changes === 1
    );
  }

  async getOrg(name: string): Promise<Organisation | undefined> {
    const r = stmt(this.db, 'SELECT * FROM orgs WHERE name = ?').get(name) as
      { name: string; plan: string; created_at: string } | undefined;
    return r && { name: r.name, plan: JSON.parse(r.plan), createdAt: r.created_at };
  }

  async putToken(t: TokenRecord): Promise<void> {
    stmt(
      this.db,
      'INSERT OR REPLACE INTO tokens (prefix, kind, org, dataset_id, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ).run(t.prefix, t.kind, t.org ?? null, t.datasetId ?? null, t.hash, t.createdAt);
  }

  async findToken(prefix: string): Promise<TokenRecord | undefined> {
    const r = stmt(this.db, 'SELECT * FROM tokens WHERE prefix = ?').get(prefix) as
      TokenRow | undefined;
    return r && toToken(r);
  }

  async listTokens(org: string): Promise<TokenRecord[]> {
    return (
      stmt(this.db, "SELECT * FROM tokens WHERE org = ? AND kind = 'org' ORDER BY created_at").all(
        org,
      ) as TokenRow[]
    ).map(toToken);
  }

  async deleteToken(org: string, prefix: string): Promise<boolean> {
    return (
      stmt(this.db, "DELETE FROM tokens WHERE org = ? AND prefix = ? AND kind = 'org'").run(
        org,
        prefix,
      ).changes === 1
    );
  }

  async removeToken(prefix: string): Promise<void> {
    stmt(this.db, 'DELETE FROM tokens WHERE prefix = ?').run(prefix);
  }

  async createDataset(ds: Dataset): Promise<boolean> {
    return (
      stmt(
        this.db,
        `INSERT OR IGNORE INTO datasets (id, org, name, fields, settings_version, created_at, embedder, embedder_dims)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        ds.id,
        ds.org,
        ds.name,
        JSON.stringify(ds.settings.fields),
        ds.settings.version,
        ds.createdAt,
        ds.embedder?.id ?? null,
        ds.embedder?.dimensions ?? null,
      ).changes === 1
    );
  }

  async adoptEmbedder(embedder: EmbedderRef): Promise<Array<Dataset & { previous?: EmbedderRef }>> {
    return this.db.transaction(() => {
      const rows = stmt(
        this.db,
        `SELECT * FROM datasets WHERE deleted_at IS NULL
             AND (embedder IS NULL OR embedder != ? OR embedder_dims != ?)`,
      ).all(embedder.id, embedder.dimensions) as DatasetRow[];
      const set = stmt(this.db, 'UPDATE datasets SET embedder = ?, embedder_dims = ? WHERE id = ?');
      for (const r of rows) set.run(embedder.id, embedder.dimensions, r.id);
      return rows.map((r) => {
        const { embedder: previous, ...ds } = toDataset(r);
        return { ...ds, embedder, ...(previous ? { previous } : {}) };
      });
    })();
  }

  async getDataset(org: string, name: string): Promise<Dataset | undefined> {
    const r = stmt(
      this.db,
      'SELECT * FROM datasets WHERE org = ? AND name = ? AND deleted_at IS NULL',
    ).get(org, name) as DatasetRow | undefined;
    return r && toDataset(r);
  }

  async getDatasetById(id: string): Promise<Dataset | undefined> {
    const r = stmt(this.db, 'SELECT * FROM datasets WHERE id = ? AND deleted_at IS NULL').get(
      id,
    ) as DatasetRow | undefined;
    return r && toDataset(r);
  }

  async listDatasets(org: string): Promise<Dataset[]> {
    return (
      stmt(
        this.db,
        'SELECT * FROM datasets WHERE org = ? AND deleted_at IS NULL ORDER BY name',
      ).all(org) as DatasetRow[]
    ).map(toDataset);
  }

  async liveDatasets(): Promise<Dataset[]> {
    return (
      stmt(
        this.db,
        'SELECT * FROM datasets WHERE deleted_at IS NULL ORDER BY created_at',
      ).all() as DatasetRow[]
    ).map(toDataset);
  }

  async listDeletedDatasets(org: string): Promise<Dataset[]> {
    return (
      stmt(
        this.db,
        'SELECT * FROM datasets WHERE org = ? AND deleted_at IS NOT NULL ORDER BY name',
      ).all(org) as DatasetRow[]
    ).map(toDataset);
  }

  async markDatasetDeleted(id: string, at: string): Promise<void> {
    this.db.transaction(() => {
      stmt(this.db, 'UPDATE datasets SET deleted_at = ? WHERE id = ?').run(at, id);
      stmt(this.db, 'DELETE FROM tokens WHERE dataset_id = ?').run(id);
    })();
  }

  async updateEnabledFields(id: string, fields: EnabledFields): Promise<number> {
    const r = stmt(
      this.db,
      'UPDATE datasets SET fields = ?, settings_version = settings_version + 1 WHERE id = ? RETURNING settings_version',
    ).get(JSON.stringify(fields), id) as { settings_version: number };
    return r.settings_version;
  }

  async updateSimilarity(
    id: string,
    change: (current: SimilaritySettings) => SimilaritySettings | undefined,
  ): Promise<SimilaritySettings | undefined> {
    return this.db
      .transaction(() => {
        const r = stmt(this.db, 'SELECT similarity FROM datasets WHERE id = ?').get(id) as
          { similarity: string | null } | undefined;
        if (!r) return undefined;
        const current = r.similarity
          ? (JSON.parse(r.similarity) as SimilaritySettings)
          : TUNING_OFF;
        const next = change(current);
        if (!next) return current;
        stmt(this.db, 'UPDATE datasets SET similarity = ? WHERE id = ?').run(
          JSON.stringify(next),
          id,
        );
        return next;
      })
      .immediate();
  }

  async browseRotation(id: string): Promise<number> {
    return (
      stmt(this.db, 'SELECT browse_rotation FROM datasets WHERE id = ?').get(id) as {
        browse_rotation: number;
      }
    ).browse_rotation;
  }

  async bumpBrowseRotation(id: string): Promise<number> {
    return (
      stmt(
        this.db,
        'UPDATE datasets SET browse_rotation = browse_rotation + 1 WHERE id = ? RETURNING browse_rotation',
      ).get(id) as {
        browse_rotation: number;
      }
    ).browse_rotation;
  }

  async getMeta(key: string): Promise<string | undefined> {
    return (
      stmt(this.db, 'SELECT value FROM meta WHERE key = ?').get(key) as
        { value: string } | undefined
    )?.value;
  }

  async claimMeta(key: string, value: string): Promise<string> {
    stmt(this.db, 'INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)').run(key, value);
    return (stmt(this.db, 'SELECT value FROM meta WHERE key = ?').get(key) as { value: string })
      .value;
  }

  async ping(): Promise<void> {
    stmt(this.db, 'SELECT 1').get();
  }
}
