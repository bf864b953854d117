import type { Delivery, DeliverySettlement, ItemFact } from '../domain/webhook';

/** A dataset's status as the event batcher last saw it, and how often it was published. */
export interface SeenStatus {
  status: 'pending' | 'published';
  /** Incremented at each change; names the publication a dataset.published delivery is for. */
  epoch: number;
}

/** How much waits in the outbox (the /metrics gauges). */
export interface OutboxDepth {
  /** Item facts not yet batched into deliveries. */
  unbatched: number;
  /** Pending deliveries whose attempt is due. */
  due: number;
  /** Pending deliveries waiting for a later attempt. */
  scheduled: number;
  /** The oldest unbatched fact's time or due delivery's due time (epoch ms). */
  oldestAt?: number;
}

/**
 * The durable, shared outbox of webhook events (contract §17): item facts the workers record
 * before acknowledging a job, the deliveries made of them, and the marks that make an event
 * happen once. Safe under any number of processes writing at once: every change is a
 * create-only write or a compare-and-set, so "at least once" never turns into "lost", and a
 * delivery is attempted by one process at a time (its claim) yet by any once the claim lapses.
 */
export interface EventOutbox {
  /** Durable once resolved; a fact whose id exists is left as it is. */
  recordFacts(facts: ItemFact[]): Promise<void>;
  /** The installation-wide batching lease: true when `owner` holds it until `until`. */
  claimBatcher(owner: string, now: number, until: number): Promise<boolean>;
  /**
   * Facts not yet batched, oldest first: about `limit` (facts stored together come together).
   * A fact recorded twice in different writes may come twice.
   */
  unbatchedFacts(limit: number): Promise<ItemFact[]>;
  /**
   * Creates the deliveries (an existing id is kept as it is, so a batch made twice is sent
   * once), then forgets the facts they were made of, as `unbatchedFacts` returned them.
   */
  enqueue(deliveries: Delivery[], done: readonly ItemFact[]): Promise<void>;
  /** A create-only marker: true for the one caller that created `key`. */
  mark(key: string, at: number): Promise<boolean>;
  /** Whether `key` was marked (a realtime read: a mark just made anywhere is seen). */
  hasMark(key: string): Promise<boolean>;
  seenStatus(datasetId: string): Promise<SeenStatus | undefined>;
  /**
   * Stores `next` if the stored status is still at `expectedEpoch` (undefined: none stored);
   * false when another process changed it first.
   */
  setSeenStatus(datasetId: string, next: SeenStatus, expectedEpoch?: number): Promise<boolean>;
  /**
   * Pending deliveries due at `now` and not claimed, oldest due first: those of `webhookIds`
   * (the active webhooks) and manual retries of any.
   */
  due(now: number, limit: number, webhookIds: readonly string[]): Promise<Delivery[]>;
  /** Claims a pending, due, unclaimed delivery for `owner` until `until`; undefined if not. */
  claim(id: string, owner: string, now: number, until: number): Promise<Delivery | undefined>;
  /** Writes an attempt's outcome and frees the claim, if `owner` still holds it. */
  settle(id: string, owner: string, next: DeliverySettlement): Promise<boolean>;
  /** A webhook's deliveries, newest first; a write just made is seen. */
  list(webhookId: string, limit: number): Promise<Delivery[]>;
  /**
   * Asks for an attempt now: a pending delivery is made due, a delivered or failed one becomes
   * pending for one manual attempt. False when the webhook has no such delivery.
   */
  retry(webhookId: string, deliveryId: string, now: number): Promise<boolean>;
  /** Drops a webhook's delivered and failed deliveries beyond the newest `keep`. */
  prune(webhookId: string, keep: number): Promise<void>;
  /** Drops every delivery of a deleted webhook. */
  forget(webhookId: string): Promise<void>;
  depth(now: number): Promise<OutboxDepth>;
}
