import crypto from 'node:crypto';
import type { Client } from '@elastic/elasticsearch';
import type {
  Delivery,
  DeliverySettlement,
  DeliveryState,
  ItemFact,
  WebhookEventType,
} from '../../domain/webhook';
import type { EventOutbox, OutboxDepth, SeenStatus } from '../../ports/event-outbox';
import { GroupCommit, WORKER_LINGER_MS } from '../group-commit';
import { casUpdate, createOnly, getVersioned } from './cas';
import type { EsIndices } from './indices';
import { unavailable } from './outage';
import { Refresher } from './refresher';

interface FactDoc {
  org: string;
  dataset_id: string;
  kind: ItemFact['kind'];
  item_id: string;
  at: number;
  error?: { code: string; message: string };
}

interface DeliveryDoc {
  id: string;
  webhook_id: string;
  org: string;
  type: WebhookEventType;
  body: string;
  state: DeliveryState;
  attempts: number;
  last_status: number | null;
  last_error?: string;
  next_attempt_at: number | null;
  claim_until: number;
  claim: string | null;
  created_at: number;
  manual: boolean;
}

interface StateDoc {
  owner?: string;
  claim_until?: number;
  status?: SeenStatus['status'];
  epoch?: number;
  at?: number;
}

const toDoc = (d: Delivery): DeliveryDoc => ({
  id: d.id,
  webhook_id: d.webhookId,
  org: d.org,
  type: d.type,
  body: d.body,
  state: d.state,
  attempts: d.attempts,
  last_status: d.lastStatus,
  ...(d.lastError !== undefined ? { last_error: d.lastError } : {}),
  next_attempt_at: d.nextAttemptAt,
  claim_until: 0,
  claim: null,
  created_at: d.createdAt,
  manual: d.manual === true,
});

const fromDoc = (d: DeliveryDoc): Delivery => ({
  id: d.id,
  webhookId: d.webhook_id,
  org: d.org,
  type: d.type,
  body: d.body,
  state: d.state,
  attempts: d.attempts,
  lastStatus: d.last_status,
  ...(d.last_error !== undefined ? { lastError: d.last_error } : {}),
  nextAttemptAt: d.next_attempt_at,
  createdAt: d.created_at,
  ...(d.manual ? { manual: true } : {}),
});

/**
 * The least time between two refreshes of the facts or deliveries this process asks for: the
 * batcher and the deliverers poll every 0.5–1 s, so a delivery enqueued is due within about
 * 0.3 s, and polling hosts cost at most five refreshes a second each.
 */
const REFRESH_GAP_MS = 200;

/** Facts requests one `_bulk` takes at most. */
const MAX_FACT_REQUESTS = 500;

/** The most hits one search returns (index.max_result_window). */
const MAX_HITS = 10_000;

/** Deliveries one round of a prune or forget deletes. */
const DELETE_PAGE = 1_000;

/** Versioned-write rounds before a 503 (a delivery or a state document is rarely contended). */
const ATTEMPTS = 16;

const BATCHER = 'batcher';
const seenId = (datasetId: string) => `ds:${datasetId}`;
/** Elasticsearch refuses an _id over 512 bytes: a long mark key is named by its hash. */
const markId = (key: string) =>
  `mark:${Buffer.byteLength(key) > 256 ? crypto.createHash('sha256').update(key).digest('hex') : key}`;

/**
 * The webhook outbox on Elasticsearch, safe under any number of hosts without scripts: facts
 * and deliveries are created create-only (a 409 means already there, which is the point of
 * their deterministic ids), and every change is a read and a write with if_seq_no
 * (casUpdate), so of racing hosts one wins and the others read again.
 *
 * Searches see only refreshed documents: `due`, `list`, `unbatchedFacts` and `depth` refresh
 * their index first, shared among concurrent callers and at most every REFRESH_GAP_MS.
 */
export class EsEventOutbox implements EventOutbox {
  private readonly refresher: Refresher;
  private readonly facts = new GroupCommit(
    (batch: ItemFact[][]) => this.writeFacts(batch.flat()).then(() => batch.map(() => undefined)),
    MAX_FACT_REQUESTS,
    WORKER_LINGER_MS,
  );

  constructor(private readonly indices: EsIndices) {
    this.refresher = new Refresher(() => indices.client, REFRESH_GAP_MS);
  }

  private get client(): Client {
    return this.indices.client;
  }

  private get deliveries(): string {
    return this.indices.shared('webhook_deliveries');
  }

  private get factIndex(): string {
    return this.indices.shared('webhook_facts');
  }

  private get stateIndex(): string {
    return this.indices.shared('outbox_state');
  }

  async recordFacts(facts: ItemFact[]): Promise<void> {
    if (facts.length) await this.facts.submit(facts);
  }

  /** One create-only `_bulk` (default translog: fsynced before it is answered). */
  private async writeFacts(facts: ItemFact[]): Promise<void> {
    const r = await this.client.bulk({
      operations: facts.flatMap((f) => [
        { create: { _index: this.factIndex, _id: f.id } },
        {
          org: f.org,
          dataset_id: f.datasetId,
          kind: f.kind,
          item_id: f.itemId,
          at: f.at,
          ...(f.error ? { error: f.error } : {}),
        } satisfies FactDoc,
      ]),
    });
    const failed = r.items.find((i) => i.create?.error && i.create.status !== 409)?.create;
    if (failed) throw unavailable(`an event fact was not written (${failed.status}); try again`, 1);
  }

  async claimBatcher(owner: string, now: number, until: number): Promise<boolean> {
    const r = await casUpdate<StateDoc>(
      this.client,
      this.stateIndex,
      BATCHER,
      (cur) =>
        cur && cur.owner !== owner && (cur.claim_until ?? 0) > now
          ? undefined
          : { owner, claim_until: until },
      { what: 'the event batcher lease', attempts: ATTEMPTS },
    );
    return r.written;
  }

  async unbatchedFacts(limit: number): Promise<ItemFact[]> {
    await this.refresher.visible(this.factIndex);
    const r = await this.client.search<FactDoc>({
      index: this.factIndex,
      size: Math.min(limit, MAX_HITS),
      sort: [{ at: 'asc' }],
    });
    return r.hits.hits.map((h) => {
      const f = h._source!;
      return {
        id: h._id!,
        org: f.org,
        datasetId: f.dataset_id,
        kind: f.kind,
        itemId: f.item_id,
        at: f.at,
        ...(f.error ? { error: f.error } : {}),
      };
    });
  }

  async enqueue(deliveries: Delivery[], doneFactIds: string[]): Promise<void> {
    if (deliveries.length) {
      const r = await this.client.bulk({
        operations: deliveries.flatMap((d) => [
          { create: { _index: this.deliveries, _id: d.id } },
          toDoc(d),
        ]),
      });
      // 409: a holder that died after this point made it already; it is kept as it is
      const failed = r.items.find((i) => i.create?.error && i.create.status !== 409)?.create;
      if (failed) throw unavailable(`a delivery was not written (${failed.status}); try again`, 1);
    }
    // Only once every delivery is stored: a death in between batches the same facts again.
    if (doneFactIds.length) {
      const r = await this.client.bulk({
        operations: doneFactIds.map((id) => ({ delete: { _index: this.factIndex, _id: id } })),
      });
      const failed = r.items.find((i) => i.delete?.error && i.delete.status !== 404)?.delete;
      if (failed) throw unavailable(`a batched fact was not removed (${failed.status})`, 1);
    }
  }

  async mark(key: string, at: number): Promise<boolean> {
    return createOnly(this.client, this.stateIndex, markId(key), { at } satisfies StateDoc);
  }

  async hasMark(key: string): Promise<boolean> {
    return (await getVersioned<StateDoc>(this.client, this.stateIndex, markId(key))) !== undefined;
  }

  async seenStatus(datasetId: string): Promise<SeenStatus | undefined> {
    const cur = await getVersioned<StateDoc>(this.client, this.stateIndex, seenId(datasetId));
    if (!cur?.doc.status) return undefined;
    return { status: cur.doc.status, epoch: cur.doc.epoch ?? 0 };
  }

  async setSeenStatus(
    datasetId: string,
    next: SeenStatus,
    expectedEpoch?: number,
  ): Promise<boolean> {
    // A conflict reads again and then finds the epoch moved: false, as the port asks.
    const r = await casUpdate<StateDoc>(
      this.client,
      this.stateIndex,
      seenId(datasetId),
      (cur) =>
        cur?.epoch === expectedEpoch ? { status: next.status, epoch: next.epoch } : undefined,
      { what: "the dataset's last-seen status", attempts: ATTEMPTS },
    );
    return r.written;
  }

  async due(now: number, limit: number, webhookIds: readonly string[]): Promise<Delivery[]> {
    await this.refresher.visible(this.deliveries);
    const r = await this.client.search<DeliveryDoc>({
      index: this.deliveries,
      size: Math.min(limit, MAX_HITS),
      query: {
        bool: {
          filter: [
            { term: { state: 'pending' } },
            { range: { next_attempt_at: { lte: now } } },
            { range: { claim_until: { lte: now } } },
          ],
          should: [{ terms: { webhook_id: [...webhookIds] } }, { term: { manual: true } }],
          minimum_should_match: 1,
        },
      },
      sort: [{ next_attempt_at: 'asc' }, { created_at: 'asc' }, { id: 'asc' }],
    });
    return r.hits.hits.map((h) => fromDoc(h._source!));
  }

  async claim(
    id: string,
    owner: string,
    now: number,
    until: number,
  ): Promise<Delivery | undefined> {
    // A racer's conflict reads again and finds it claimed: one claimer wins.
    const r = await casUpdate<DeliveryDoc>(
      this.client,
      this.deliveries,
      id,
      (cur) =>
        cur?.state === 'pending' &&
        cur.next_attempt_at !== null &&
        cur.next_attempt_at <= now &&
        cur.claim_until <= now
          ? { ...cur, claim: owner, claim_until: until }
          : undefined,
      { what: 'a webhook delivery', attempts: ATTEMPTS },
    );
    return r.written && r.doc ? fromDoc(r.doc) : undefined;
  }

  async settle(id: string, owner: string, next: DeliverySettlement): Promise<boolean> {
    const r = await casUpdate<DeliveryDoc>(
      this.client,
      this.deliveries,
      id,
      (cur) => {
        if (cur?.claim !== owner) return undefined;
        const { last_error: _, ...rest } = cur;
        return {
          ...rest,
          state: next.state,
          attempts: next.attempts,
          last_status: next.lastStatus,
          ...(next.lastError !== undefined ? { last_error: next.lastError } : {}),
          next_attempt_at: next.nextAttemptAt,
          manual: next.manual === true,
          claim: null,
          claim_until: 0,
        };
      },
      { what: 'a webhook delivery', attempts: ATTEMPTS },
    );
    return r.written;
  }

  async list(webhookId: string, limit: number): Promise<Delivery[]> {
    await this.refresher.visible(this.deliveries);
    const r = await this.client.search<DeliveryDoc>({
      index: this.deliveries,
      size: Math.min(limit, MAX_HITS),
      query: { term: { webhook_id: webhookId } },
      sort: [{ created_at: 'desc' }, { id: 'desc' }],
    });
    return r.hits.hits.map((h) => fromDoc(h._source!));
  }

  async retry(webhookId: string, deliveryId: string, now: number): Promise<boolean> {
    let found = false;
    await casUpdate<DeliveryDoc>(
      this.client,
      this.deliveries,
      deliveryId,
      (cur) => {
        found = cur?.webhook_id === webhookId;
        if (!cur || !found) return undefined;
        // a pending delivery only moves its attempt forward (a claim on it stands)
        if (cur.state === 'pending') return { ...cur, next_attempt_at: now };
        return { ...cur, state: 'pending', manual: true, next_attempt_at: now };
      },
      { what: 'a webhook delivery', attempts: ATTEMPTS },
    );
    return found;
  }

  async prune(webhookId: string, keep: number): Promise<void> {
    await this.refresher.visible(this.deliveries);
    // The log is the newest `keep` deliveries: the settled ones after them go.
    const r = await this.client.search<DeliveryDoc>({
      index: this.deliveries,
      from: keep,
      size: 1,
      query: { term: { webhook_id: webhookId } },
      sort: [{ created_at: 'desc' }, { id: 'desc' }],
      _source: ['created_at', 'id'],
    });
    const edge = r.hits.hits[0]?._source;
    if (!edge) return;
    await this.deleteAll({
      bool: {
        filter: [
          { term: { webhook_id: webhookId } },
          { terms: { state: ['delivered', 'failed'] } },
        ],
        should: [
          { range: { created_at: { lt: edge.created_at } } },
          {
            bool: {
              filter: [
                { term: { created_at: edge.created_at } },
                { range: { id: { lte: edge.id } } },
              ],
            },
          },
        ],
        minimum_should_match: 1,
      },
    });
  }

  async forget(webhookId: string): Promise<void> {
    await this.refresher.visible(this.deliveries);
    await this.deleteAll({ term: { webhook_id: webhookId } });
  }

  /**
   * Deletes the deliveries `query` finds, a page at a time, each at the version the search
   * read: one changed meanwhile (a retry made it pending again) answers 409 and is kept.
   */
  private async deleteAll(query: Record<string, unknown>): Promise<void> {
    let after: unknown[] | undefined;
    for (;;) {
      const r = await this.client.search({
        index: this.deliveries,
        size: DELETE_PAGE,
        query: query as never,
        sort: [{ created_at: 'desc' }, { id: 'desc' }],
        seq_no_primary_term: true,
        _source: false,
        ...(after ? { search_after: after as never } : {}),
      });
      const hits = r.hits.hits;
      if (hits.length) {
        const b = await this.client.bulk({
          operations: hits.map((h) => ({
            delete: {
              _index: this.deliveries,
              _id: h._id!,
              if_seq_no: h._seq_no!,
              if_primary_term: h._primary_term!,
            },
          })),
        });
        const failed = b.items.find(
          (i) => i.delete?.error && i.delete.status !== 404 && i.delete.status !== 409,
        )?.delete;
        if (failed) throw unavailable(`a delivery was not removed (${failed.status})`, 1);
      }
      if (hits.length < DELETE_PAGE) return;
      after = hits.at(-1)!.sort;
    }
  }

  async depth(now: number): Promise<OutboxDepth> {
    await Promise.all([
      this.refresher.visible(this.factIndex),
      this.refresher.visible(this.deliveries),
    ]);
    const [facts, deliveries] = await Promise.all([
      this.client.search({
        index: this.factIndex,
        size: 0,
        track_total_hits: true,
        aggs: { oldest: { min: { field: 'at' } } },
      }),
      this.client.search({
        index: this.deliveries,
        size: 0,
        query: { term: { state: 'pending' } },
        aggs: {
          due: {
            filter: { range: { next_attempt_at: { lte: now } } },
            aggs: { oldest: { min: { field: 'next_attempt_at' } } },
          },
          scheduled: { filter: { range: { next_attempt_at: { gt: now } } } },
        },
      }),
    ]);
    type Min = { value: number | null };
    const fa = facts.aggregations as { oldest: Min };
    const da = deliveries.aggregations as {
      due: { doc_count: number; oldest: Min };
      scheduled: { doc_count: number };
    };
    const total = facts.hits.total;
    const oldest = [fa.oldest.value, da.due.oldest.value].filter((x): x is number => x !== null);
    return {
      unbatched: typeof total === 'number' ? total : (total?.value ?? 0),
      due: da.due.doc_count,
      scheduled: da.scheduled.doc_count,
      ...(oldest.length ? { oldestAt: Math.min(...oldest) } : {}),
    };
  }
}
