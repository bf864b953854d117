import crypto from 'node:crypto';
import type { Client } from '@elastic/elasticsearch';
import type {
  Delivery,
  DeliverySettlement,
  DeliveryState,
  ItemFact,
  WebhookEventType,
} from '../../domain/webhook';
import { compareText } from '../../domain/text-order';
import type { EventOutbox, OutboxDepth, SeenStatus } from '../../ports/event-outbox';
import { GroupCommit } from '../group-commit';
import type { BulkLane } from './bulk-lane';
import { casUpdate, createOnly, getVersioned, type Versioned } from './cas';
import { isConflict, isNotFound, type EsIndices } from './indices';
import { unavailable } from './outage';
import { Refresher } from './refresher';

/** One item outcome as the facts index keeps it. */
interface StoredFact {
  id: string;
  org: string;
  dataset_id: string;
  kind: ItemFact['kind'];
  item_id: string;
  at: number;
  error?: { code: string; message: string };
}

/**
 * The facts one worker wrote together, `at` their oldest. A document of a release that wrote
 * one fact per document has the fact's fields at the top and its id as _id.
 */
type FactDoc = { at: number; count: number; facts: StoredFact[] } | Omit<StoredFact, 'id'>;

/** Facts one document holds at most. */
const FACTS_PER_DOC = 500;

/**
 * Fact documents one read returns at most: a document holds the facts of the jobs one worker
 * finished together (a few, at most its jobs in hand), so this bounds a read's memory while a
 * pass still takes thousands of facts.
 */
const FACT_DOCS_PER_READ = 1_000;

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
  /** No linger of its own: facts arriving while a group is in the lane form the next group. */
  private readonly factGroups = new GroupCommit(
    (batch: ItemFact[][]) => this.writeFacts(batch.flat()).then(() => batch.map(() => undefined)),
    FACTS_PER_DOC,
  );
  /**
   * The version of a delivery this process last saw (in a look, or its own claim), so that a
   * claim and a settlement write without reading first; a conflict reads as before.
   */
  private readonly seen = new Map<string, Versioned<DeliveryDoc>>();
  /** The lease document as this process last wrote it: a renewal needs no read. */
  private lease?: Versioned<StateDoc>;

  constructor(
    private readonly indices: EsIndices,
    private readonly lane: BulkLane,
  ) {
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

  /**
   * The facts of jobs finishing together go in one document, in the bulk lane's request beside
   * their image counts (default translog: fsynced before it is answered): a document per fact
   * cost Elasticsearch a write and a delete per item.
   */
  async recordFacts(facts: ItemFact[]): Promise<void> {
    if (facts.length) await this.factGroups.submit(facts);
  }

  private async writeFacts(all: ItemFact[]): Promise<void> {
    const facts = [...new Map(all.map((f) => [f.id, f])).values()];
    const stored = facts.map((f): StoredFact => ({
      id: f.id,
      org: f.org,
      dataset_id: f.datasetId,
      kind: f.kind,
      item_id: f.itemId,
      at: f.at,
      ...(f.error ? { error: f.error } : {}),
    }));
    // named by its facts: the same group written twice (a retried request) is one document
    const id = crypto
      .createHash('sha256')
      .update(stored.map((f) => f.id).join(','))
      .digest('base64url')
      .slice(0, 32);
    const doc: FactDoc = {
      at: Math.min(...facts.map((f) => f.at)),
      count: stored.length,
      facts: stored,
    };
    const [item] = await this.lane.submit([[{ create: { _index: this.factIndex, _id: id } }, doc]]);
    if (item?.error && item.status !== 409)
      throw unavailable(`an event fact was not written (${item.status}); try again`, 1);
  }

  async claimBatcher(owner: string, now: number, until: number): Promise<boolean> {
    const known = this.lease?.doc.owner === owner ? this.lease : undefined;
    this.lease = undefined;
    const r = await casUpdate<StateDoc>(
      this.client,
      this.stateIndex,
      BATCHER,
      (cur) =>
        cur && cur.owner !== owner && (cur.claim_until ?? 0) > now
          ? undefined
          : { owner, claim_until: until },
      { what: 'the event batcher lease', attempts: ATTEMPTS, ...(known ? { known } : {}) },
    );
    if (r.written) this.lease = r.version;
    return r.written;
  }

  /** Remembers versions seen, forgetting them all past a bound (a look reads at most 10,000). */
  private remember(id: string, v: Versioned<DeliveryDoc> | undefined): void {
    if (!v) return void this.seen.delete(id);
    if (this.seen.size >= 20_000) this.seen.clear();
    this.seen.set(id, v);
  }

  private recall(id: string): { known?: Versioned<DeliveryDoc> } {
    const known = this.seen.get(id);
    this.seen.delete(id);
    return known ? { known } : {};
  }

  /**
   * Facts oldest first, each with `ref` = its document's id and fact count, so that enqueue
   * deletes a document all of whose facts were batched and rewrites one batched in part.
   */
  async unbatchedFacts(limit: number): Promise<ItemFact[]> {
    await this.refresher.visible(this.factIndex);
    const r = await this.client.search<FactDoc>({
      index: this.factIndex,
      size: Math.min(limit, FACT_DOCS_PER_READ),
      sort: [{ at: 'asc' }],
    });
    const out: ItemFact[] = [];
    for (const h of r.hits.hits) {
      if (out.length >= limit) break;
      const d = h._source!;
      const facts = 'facts' in d ? d.facts : [{ ...d, id: h._id! }];
      const ref = `${h._id!}/${facts.length}`;
      for (const f of facts)
        out.push({
          id: f.id,
          org: f.org,
          datasetId: f.dataset_id,
          kind: f.kind,
          itemId: f.item_id,
          at: f.at,
          ...(f.error ? { error: f.error } : {}),
          ref,
        });
    }
    // a document is as old as its oldest fact: its others may be later than those of the next;
    // ties in the order SQLite gives the embedded engine's
    return out.sort((a, b) => a.at - b.at || compareText(a.id, b.id));
  }

  async enqueue(deliveries: Delivery[], done: readonly ItemFact[]): Promise<void> {
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
    const byDoc = new Map<string, { count: number; done: Set<string> }>();
    for (const f of done) {
      const [docId = f.id, count = '1'] = (f.ref ?? '').split('/').filter(Boolean);
      const d = byDoc.get(docId) ?? { count: Number(count), done: new Set<string>() };
      d.done.add(f.id);
      byDoc.set(docId, d);
    }
    const whole = [...byDoc].filter(([, d]) => d.done.size >= d.count).map(([id]) => id);
    if (whole.length) {
      const r = await this.client.bulk({
        operations: whole.map((id) => ({ delete: { _index: this.factIndex, _id: id } })),
      });
      const failed = r.items.find((i) => i.delete?.error && i.delete.status !== 404)?.delete;
      if (failed) throw unavailable(`a batched fact was not removed (${failed.status})`, 1);
    }
    for (const [id, d] of byDoc) if (d.done.size < d.count) await this.forgetSome(id, d.done);
  }

  /** A document batched in part keeps the rest of its facts. */
  private async forgetSome(id: string, done: Set<string>): Promise<void> {
    const r = await casUpdate<FactDoc>(
      this.client,
      this.factIndex,
      id,
      (cur) => {
        if (!cur || !('facts' in cur)) return undefined;
        const facts = cur.facts.filter((f) => !done.has(f.id));
        return facts.length === cur.facts.length || !facts.length
          ? undefined
          : { at: Math.min(...facts.map((f) => f.at)), count: facts.length, facts };
      },
      { what: 'the facts batched in part', attempts: ATTEMPTS },
    );
    const left = r.doc && 'facts' in r.doc ? r.doc.facts.filter((f) => !done.has(f.id)) : [];
    if (r.version && !left.length)
      await this.client
        .delete({
          index: this.factIndex,
          id,
          if_seq_no: r.version.seqNo,
          if_primary_term: r.version.primaryTerm,
        })
        .catch((e: unknown) => {
          // changed or gone since: the next pass reads it again
          if (!isConflict(e) && !isNotFound(e)) throw e;
        });
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
      seq_no_primary_term: true,
    });
    return r.hits.hits.map((h) => {
      this.remember(h._id!, { doc: h._source!, seqNo: h._seq_no!, primaryTerm: h._primary_term! });
      return fromDoc(h._source!);
    });
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
      { what: 'a webhook delivery', attempts: ATTEMPTS, ...this.recall(id) },
    );
    if (!r.written || !r.doc) return undefined;
    this.remember(id, r.version);
    return fromDoc(r.doc);
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
      { what: 'a webhook delivery', attempts: ATTEMPTS, ...this.recall(id) },
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
        aggs: {
          oldest: { min: { field: 'at' } },
          // a document of one fact from an earlier release has no count
          n: { sum: { field: 'count', missing: 1 } },
        },
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
    const fa = facts.aggregations as { oldest: Min; n: { value: number } };
    const da = deliveries.aggregations as {
      due: { doc_count: number; oldest: Min };
      scheduled: { doc_count: number };
    };
    const oldest = [fa.oldest.value, da.due.oldest.value].filter((x): x is number => x !== null);
    return {
      unbatched: fa.n.value,
      due: da.due.doc_count,
      scheduled: da.scheduled.doc_count,
      ...(oldest.length ? { oldestAt: Math.min(...oldest) } : {}),
    };
  }
}
