import type { Logger } from 'pino';
import { statusOf, type DatasetCounts } from '../domain/dataset';
import { LIMITS } from '../domain/limits';
import {
  WEBHOOK_BATCH,
  type Delivery,
  type ItemFact,
  type WebhookEventData,
} from '../domain/webhook';
import type { EventOutbox } from '../ports/event-outbox';
import { deliveryId, newDelivery } from '../services/webhook-deliveries';
import type { WebhookDirectory } from '../services/webhook-directory';

/** How long the installation-wide batching lease lasts without renewal. */
const LEASE_MS = 10_000;
/** Facts read per pass. */
const READ_LIMIT = 5 * WEBHOOK_BATCH;
/**
 * A fact is batched once it is this old (or its group fills a delivery): by then the engine's
 * counts include its item (Elasticsearch shows writes within its 1 s refresh), so the counts
 * a publication is judged on are never behind the facts that made it. The first judgement of a
 * dataset also compares with facts still settling, and counts afresh for it.
 */
const FACT_SETTLE_MS = 1100;
/**
 * A group of facts waits until its oldest is this old (or it fills a delivery), so a trickle of
 * items makes a delivery per webhook every two seconds and a stream one a second, not one per
 * pass whatever comes: each costs the outbox a write, a claim and a settlement, and the
 * receiver a request. With passes a second apart the first id still goes out within about
 * three seconds (contract §17: within 5 s).
 */
const GATHER_MS = 2000;

export interface BatcherDeps {
  outbox: EventOutbox;
  directory: WebhookDirectory;
  /** A dataset's name and current counts, or undefined once it is deleted. */
  dataset(id: string): Promise<
    | {
        org: string;
        name: string;
        /** `fresh`: with every item written before the call counted (ItemReader.counts). */
        counts: (fresh?: boolean) => Promise<DatasetCounts>;
      }
    | undefined
  >;
  now: () => number;
  log: Logger;
  /** This process, as the lease names it. */
  owner: string;
  /** Called after deliveries were made, so they are attempted without waiting for a tick. */
  made: () => void;
}

/**
 * Turns item facts into deliveries (contract §17: up to 1,000 ids each, sent within 5 s of the
 * first) and notices publications. One process of the installation holds the lease at a time;
 * any other takes over within LEASE_MS of its death, and facts it left are batched again into
 * the same deliveries.
 */
export class OutboxBatcher {
  constructor(private readonly deps: BatcherDeps) {}

  /** One pass; false when another process holds the lease. */
  async pass(): Promise<boolean> {
    const { outbox, now } = this.deps;
    const start = now();
    if (!(await outbox.claimBatcher(this.deps.owner, start, start + LEASE_MS))) return false;
    const read = await outbox.unbatchedFacts(READ_LIMIT);
    // a fact recorded twice (a job redelivered meanwhile) may be read twice: told once
    const facts = [...new Map(read.map((f) => [f.id, f])).values()];
    const groups = new Map<string, ItemFact[]>();
    for (const f of facts) {
      const key = `${f.datasetId}\u0000${f.kind}`;
      const g = groups.get(key) ?? [];
      g.push(f);
      groups.set(key, g);
    }
    const deliveries: Delivery[] = [];
    const done = new Set<string>();
    /**
     * Per dataset with processed facts ready in this pass: how many processed facts were read,
     * ready or not. Facts are recorded only while a webhook wants them, so they count the
     * processings since one existed (an item processed again counts again); the ones not yet
     * settled count too, or a fast ingest (more than 200 items in the settling second) would
     * look published before its webhook.
     */
    const published = new Map<string, { told: number }>();
    const datasets = new Map<string, ReturnType<BatcherDeps['dataset']>>();
    const dataset = (id: string) => {
      if (!datasets.has(id)) datasets.set(id, this.deps.dataset(id));
      return datasets.get(id)!;
    };
    for (const group of groups.values()) {
      group.sort((a, b) => a.at - b.at || a.id.localeCompare(b.id));
      const settled = group.filter((f) => f.at <= start - FACT_SETTLE_MS);
      // a full delivery goes at once; otherwise, once gathered, the facts whose items the
      // counts include
      const gathered = group[0]!.at <= start - GATHER_MS;
      const ready = group.length >= WEBHOOK_BATCH ? group : gathered ? settled : [];
      if (!ready.length) continue;
      const first = ready[0]!;
      const ds = await dataset(first.datasetId);
      for (const f of ready) done.add(f.id);
      if (!ds) continue;
      if (first.kind === 'processed') published.set(first.datasetId, { told: group.length });
      const type = first.kind === 'processed' ? 'items.processed' : 'items.failed';
      const hooks = await this.deps.directory.wanting(first.org, type, first.datasetId);
      for (let i = 0; i < ready.length; i += WEBHOOK_BATCH) {
        const chunk = ready.slice(i, i + WEBHOOK_BATCH);
        const event: WebhookEventData =
          type === 'items.processed'
            ? { type, dataset: ds.name, ids: chunk.map((f) => f.itemId) }
            : {
                type,
                dataset: ds.name,
                errors: chunk.map((f) => ({
                  id: f.itemId,
                  code: f.error?.code ?? 'processing_failed',
                  message: f.error?.message ?? '',
                })),
              };
        for (const hook of hooks) {
          const id = deliveryId(hook.id, type, chunk[0]!.id, chunk.at(-1)!.id, chunk.length);
          deliveries.push(newDelivery(hook, id, start, event));
        }
      }
    }
    // Publications first: facts are forgotten last, so a holder dying anywhere in a pass
    // leaves them for the next, which makes the same deliveries (create-only) again.
    for (const [datasetId, pass] of published)
      await this.publication(await dataset(datasetId), datasetId, pass);
    if (done.size)
      await outbox.enqueue(
        deliveries,
        read.filter((f) => done.has(f.id)),
      );
    if (deliveries.length || published.size) this.deps.made();
    return true;
  }

  /**
   * dataset.published, once per publication: the status the batcher last saw is stored, and
   * moving it from pending to published (a compare-and-set) follows the deliveries, whose ids
   * name the publication (the stored epoch), so a pass done twice sends it once. A fall back to
   * pending makes no facts: PublicationWatch stores it when items are deleted or changed. A
   * dataset first seen already published is announced only if the items whose facts this pass
   * read published it, so one published before its webhook stays silent.
   */
  private async publication(
    ds: Awaited<ReturnType<BatcherDeps['dataset']>>,
    datasetId: string,
    pass: { told: number },
  ): Promise<void> {
    const { outbox } = this.deps;
    if (!ds) return;
    const seen = await outbox.seenStatus(datasetId);
    // processed items only raise the counts: a published dataset stays so (a fall is stored
    // by PublicationWatch), and counting it again would cost a search every pass
    if (seen?.status === 'published') return;
    // first seen: the facts read include unsettled ones, whose items must be counted too, or a
    // dataset published before its webhook would look published by them
    const counts = await ds.counts(seen === undefined);
    const status = statusOf(counts);
    if (seen?.status === status) return;
    const epoch = (seen?.epoch ?? 0) + 1;
    const announce =
      status === 'published' &&
      (seen !== undefined || counts.processed - pass.told < LIMITS.minProcessedForVision);
    if (announce) {
      const at = this.deps.now();
      const hooks = await this.deps.directory.wanting(ds.org, 'dataset.published', datasetId);
      const event = { type: 'dataset.published', dataset: ds.name, counts } as const;
      const made = hooks.map((h) =>
        newDelivery(h, deliveryId(h.id, event.type, datasetId, epoch), at, event),
      );
      if (made.length) await outbox.enqueue(made, []);
    }
    await outbox.setSeenStatus(datasetId, { status, epoch }, seen?.epoch);
  }
}
