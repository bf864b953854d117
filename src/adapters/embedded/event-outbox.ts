import type {
  Delivery,
  DeliverySettlement,
  DeliveryState,
  ItemFact,
  WebhookEventType,
} from '../../domain/webhook';
import type { EventOutbox, OutboxDepth, SeenStatus } from '../../ports/event-outbox';
import { GroupCommit, WORKER_LINGER_MS } from '../group-commit';
import { type Db, stmt } from './db';

interface DeliveryRow {
  id: string;
  webhook_id: string;
  org: string;
  type: string;
  body: string;
  state: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_attempt_at: number | null;
  created_at: number;
  manual: number;
}

interface FactRow {
  id: string;
  org: string;
  dataset_id: string;
  kind: string;
  item_id: string;
  at: number;
  error: string | null;
}

const delivery = (r: DeliveryRow): Delivery => ({
  id: r.id,
  webhookId: r.webhook_id,
  org: r.org,
  type: r.type as WebhookEventType,
  body: r.body,
  state: r.state as DeliveryState,
  attempts: r.attempts,
  lastStatus: r.last_status,
  ...(r.last_error !== null ? { lastError: r.last_error } : {}),
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  ...(r.manual ? { manual: true } : {}),
});

const fact = (r: FactRow): ItemFact => ({
  id: r.id,
  org: r.org,
  datasetId: r.dataset_id,
  kind: r.kind as ItemFact['kind'],
  itemId: r.item_id,
  at: r.at,
  ...(r.error !== null ? { error: JSON.parse(r.error) as NonNullable<ItemFact['error']> } : {}),
});

const BATCHER = 'batcher';
const seenKey = (datasetId: string) => `ds:${datasetId}`;

/**
 * The webhook outbox in the embedded SQLite file. API and worker processes may share the file,
 * so every check-then-write is one statement or runs in an IMMEDIATE transaction (the write
 * lock is taken before the read), and the file is FULL-synced: a fact is on disk once recorded.
 */
export class SqliteEventOutbox implements EventOutbox {
  /**
   * Facts of jobs finishing within WORKER_LINGER_MS share one transaction: each commit is an
   * fsync that holds the event loop (the driver is synchronous), which one per item would make
   * the ingest's bottleneck.
   */
  private readonly facts = new GroupCommit<ItemFact[], void>(
    async (batches) => {
      this.writeFacts(batches.flat());
      return batches.map(() => undefined);
    },
    256,
    WORKER_LINGER_MS,
  );

  constructor(private readonly db: Db) {}

  recordFacts(facts: ItemFact[]): Promise<void> {
    return this.facts.submit(facts);
  }

  private writeFacts(facts: ItemFact[]): void {
    const insert = stmt(
      this.db,
      `INSERT OR IGNORE INTO webhook_facts (id, org, dataset_id, kind, item_id, at, error)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
    this.db.transaction(() => {
      for (const f of facts)
        insert.run(
          f.id,
          f.org,
          f.datasetId,
          f.kind,
          f.itemId,
          f.at,
          f.error ? JSON.stringify(f.error) : null,
        );
    })();
  }

  async claimBatcher(owner: string, now: number, until: number): Promise<boolean> {
    return this.db
      .transaction((): boolean => {
        const cur = this.state<{ owner: string; until: number }>(BATCHER);
        if (cur && cur.owner !== owner && cur.until > now) return false;
        this.put(BATCHER, { owner, until });
        return true;
      })
      .immediate();
  }

  async unbatchedFacts(limit: number): Promise<ItemFact[]> {
    const rows = stmt(this.db, 'SELECT * FROM webhook_facts ORDER BY at, id LIMIT ?').all(
      limit,
    ) as FactRow[];
    return rows.map(fact);
  }

  async enqueue(deliveries: Delivery[], done: readonly ItemFact[]): Promise<void> {
    const insert = stmt(
      this.db,
      `INSERT OR IGNORE INTO webhook_deliveries (id, webhook_id, org, type, body, state, attempts,
         last_status, last_error, next_attempt_at, created_at, manual)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const forget = stmt(this.db, 'DELETE FROM webhook_facts WHERE id = ?');
    this.db.transaction(() => {
      for (const d of deliveries)
        insert.run(
          d.id,
          d.webhookId,
          d.org,
          d.type,
          d.body,
          d.state,
          d.attempts,
          d.lastStatus,
          d.lastError ?? null,
          d.nextAttemptAt,
          d.createdAt,
          d.manual ? 1 : 0,
        );
      for (const f of done) forget.run(f.id);
    })();
  }

  async mark(key: string, at: number): Promise<boolean> {
    const r = stmt(this.db, 'INSERT OR IGNORE INTO outbox_state (key, value) VALUES (?, ?)').run(
      `mark:${key}`,
      JSON.stringify({ at }),
    );
    return r.changes === 1;
  }

  async hasMark(key: string): Promise<boolean> {
    return this.state(`mark:${key}`) !== undefined;
  }

  async seenStatus(datasetId: string): Promise<SeenStatus | undefined> {
    return this.state<SeenStatus>(seenKey(datasetId));
  }

  async setSeenStatus(
    datasetId: string,
    next: SeenStatus,
    expectedEpoch?: number,
  ): Promise<boolean> {
    return this.db
      .transaction((): boolean => {
        const cur = this.state<SeenStatus>(seenKey(datasetId));
        if (cur?.epoch !== expectedEpoch) return false;
        this.put(seenKey(datasetId), { status: next.status, epoch: next.epoch });
        return true;
      })
      .immediate();
  }

  async due(now: number, limit: number, webhookIds: readonly string[]): Promise<Delivery[]> {
    const rows = stmt(
      this.db,
      `SELECT * FROM webhook_deliveries
         WHERE state = 'pending' AND next_attempt_at <= ? AND claim_until <= ?
           AND (manual = 1 OR webhook_id IN (SELECT value FROM json_each(?)))
         ORDER BY next_attempt_at, created_at, id LIMIT ?`,
    ).all(now, now, JSON.stringify(webhookIds), limit) as DeliveryRow[];
    return rows.map(delivery);
  }

  async claim(
    id: string,
    owner: string,
    now: number,
    until: number,
  ): Promise<Delivery | undefined> {
    // One statement: SQLite runs it under the write lock, so of concurrent claimers (in any
    // process) exactly one finds the delivery unclaimed.
    const r = stmt(
      this.db,
      `UPDATE webhook_deliveries SET claim = ?, claim_until = ?
         WHERE id = ? AND state = 'pending' AND next_attempt_at <= ? AND claim_until <= ?
         RETURNING *`,
    ).get(owner, until, id, now, now) as DeliveryRow | undefined;
    return r && delivery(r);
  }

  async settle(id: string, owner: string, next: DeliverySettlement): Promise<boolean> {
    const r = stmt(
      this.db,
      `UPDATE webhook_deliveries SET state = ?, attempts = ?, last_status = ?, last_error = ?,
         next_attempt_at = ?, manual = ?, claim = NULL, claim_until = 0
         WHERE id = ? AND claim = ?`,
    ).run(
      next.state,
      next.attempts,
      next.lastStatus,
      next.lastError ?? null,
      next.nextAttemptAt,
      next.manual ? 1 : 0,
      id,
      owner,
    );
    return r.changes === 1;
  }

  async list(webhookId: string, limit: number): Promise<Delivery[]> {
    const rows = stmt(
      this.db,
      `SELECT * FROM webhook_deliveries WHERE webhook_id = ?
         ORDER BY created_at DESC, id DESC LIMIT ?`,
    ).all(webhookId, limit) as DeliveryRow[];
    return rows.map(delivery);
  }

  async retry(webhookId: string, deliveryId: string, now: number): Promise<boolean> {
    // A pending delivery only moves its attempt forward (its claim, if any, stands); a settled
    // one gets one manual attempt with its attempts kept.
    const r = stmt(
      this.db,
      `UPDATE webhook_deliveries SET
           next_attempt_at = ?,
           manual = CASE WHEN state = 'pending' THEN manual ELSE 1 END,
           state = 'pending'
         WHERE id = ? AND webhook_id = ?`,
    ).run(now, deliveryId, webhookId);
    return r.changes === 1;
  }

  async prune(webhookId: string, keep: number): Promise<void> {
    // The log is the newest `keep` deliveries; older ones go unless still pending.
    stmt(
      this.db,
      `DELETE FROM webhook_deliveries
         WHERE webhook_id = ? AND state != 'pending' AND id NOT IN (
           SELECT id FROM webhook_deliveries WHERE webhook_id = ?
             ORDER BY created_at DESC, id DESC LIMIT ?)`,
    ).run(webhookId, webhookId, keep);
  }

  async forget(webhookId: string): Promise<void> {
    stmt(this.db, 'DELETE FROM webhook_deliveries WHERE webhook_id = ?').run(webhookId);
  }

  async depth(now: number): Promise<OutboxDepth> {
    const facts = stmt(
      this.db,
      'SELECT count(*) AS n, min(at) AS oldest FROM webhook_facts',
    ).get() as { n: number; oldest: number | null };
    const d = stmt(
      this.db,
      `SELECT
         count(CASE WHEN next_attempt_at <= ? THEN 1 END) AS due,
         count(CASE WHEN next_attempt_at > ? THEN 1 END) AS scheduled,
         min(CASE WHEN next_attempt_at <= ? THEN next_attempt_at END) AS oldest
       FROM webhook_deliveries WHERE state = 'pending'`,
    ).get(now, now, now) as { due: number; scheduled: number; oldest: number | null };
    const oldest = [facts.oldest, d.oldest].filter((x): x is number => x !== null);
    return {
      unbatched: facts.n,
      due: d.due,
      scheduled: d.scheduled,
      ...(oldest.length ? { oldestAt: Math.min(...oldest) } : {}),
    };
  }

  private state<T>(key: string): T | undefined {
    const r = stmt(this.db, 'SELECT value FROM outbox_state WHERE key = ?').get(key) as
      { value: string } | undefined;
    return r && (JSON.parse(r.value) as T);
  }

  private put(key: string, value: unknown): void {
    stmt(
      this.db,
      `INSERT INTO outbox_state (key, value) VALUES (?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    ).run(key, JSON.stringify(value));
  }
}
