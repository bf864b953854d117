import type { DisabledReason, Webhook, WebhookEventType, WebhookState } from '../../domain/webhook';
import type { WebhookStore } from '../../ports/webhook-store';
import { type Db, stmt } from './db';

interface Row {
  id: string;
  org: string;
  url: string;
  events: string;
  dataset_ids: string | null;
  state: string;
  disabled_reason: string | null;
  salt: string;
  created_at: number;
}

const fromRow = (r: Row): Webhook => ({
  id: r.id,
  org: r.org,
  url: r.url,
  events: JSON.parse(r.events) as WebhookEventType[],
  ...(r.dataset_ids !== null ? { datasetIds: JSON.parse(r.dataset_ids) as string[] } : {}),
  state: r.state as WebhookState,
  ...(r.disabled_reason !== null ? { disabledReason: r.disabled_reason as DisabledReason } : {}),
  salt: r.salt,
  createdAt: r.created_at,
});

/** The webhook registry in the embedded SQLite file, shared by every process that opens it. */
export class SqliteWebhookStore implements WebhookStore {
  constructor(private readonly db: Db) {}

  async create(w: Webhook, maxPerOrg: number): Promise<boolean> {
    // IMMEDIATE takes the write lock before counting, so processes sharing the file cannot
    // both add the organisation's last allowed webhook.
    return this.db
      .transaction((): boolean => {
        const n = stmt(this.db, 'SELECT count(*) AS n FROM webhooks WHERE org = ?').get(w.org) as {
          n: number;
        };
        if (n.n >= maxPerOrg) return false;
        // an id already there (a repeated create) adds nothing
        const r = stmt(
          this.db,
          `INSERT OR IGNORE INTO webhooks (id, org, url, events, dataset_ids, state, disabled_reason, salt, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          w.id,
          w.org,
          w.url,
          JSON.stringify(w.events),
          w.datasetIds ? JSON.stringify(w.datasetIds) : null,
          w.state,
          w.disabledReason ?? null,
          w.salt,
          w.createdAt,
        );
        return r.changes === 1;
      })
      .immediate();
  }

  async list(org: string): Promise<Webhook[]> {
    const rows = stmt(
      this.db,
      'SELECT * FROM webhooks WHERE org = ? ORDER BY created_at, rowid',
    ).all(org) as Row[];
    return rows.map(fromRow);
  }

  async get(org: string, id: string): Promise<Webhook | undefined> {
    const r = stmt(this.db, 'SELECT * FROM webhooks WHERE id = ? AND org = ?').get(id, org) as
      Row | undefined;
    return r && fromRow(r);
  }

  async delete(org: string, id: string): Promise<boolean> {
    return stmt(this.db, 'DELETE FROM webhooks WHERE id = ? AND org = ?').run(id, org).changes > 0;
  }

  async setState(id: string, state: WebhookState, reason?: DisabledReason): Promise<void> {
    stmt(this.db, 'UPDATE webhooks SET state = ?, disabled_reason = ? WHERE id = ?').run(
      state,
      reason ?? null,
      id,
    );
  }

  async all(): Promise<Webhook[]> {
    const rows = stmt(this.db, 'SELECT * FROM webhooks ORDER BY created_at, rowid').all() as Row[];
    return rows.map(fromRow);
  }
}
