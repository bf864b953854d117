import crypto from 'node:crypto';
import type { WebhookEventType } from '../domain/webhook';
import type { EventOutbox } from '../ports/event-outbox';
import type { WebhookDirectory } from '../services/webhook-directory';
import type { ItemOutcome, OutcomeSink } from './item-outcomes';

/** Event types an item outcome of each kind can make (publication follows processed items). */
const FOLLOWED: Record<ItemOutcome['kind'], readonly WebhookEventType[]> = {
  processed: ['items.processed', 'dataset.published'],
  failed: ['items.failed'],
};

/** The fact of one outcome: the same processing always gets the same id. */
function factId(o: ItemOutcome): string {
  return crypto
    .createHash('sha256')
    .update(JSON.stringify([o.kind, o.datasetId, o.itemId, o.url, o.version]))
    .digest('base64url')
    .slice(0, 32);
}

/**
 * Records an item's outcome in the webhook outbox when a webhook wants to hear of it, before
 * the job is acknowledged (the outbox's write is durable when it resolves), so a crash never
 * loses an event: a redelivered job records the same fact again, which is a no-op.
 */
export class WebhookFacts implements OutcomeSink {
  constructor(
    private readonly outbox: EventOutbox,
    private readonly directory: WebhookDirectory,
  ) {}

  async record(o: ItemOutcome): Promise<void> {
    if (!(await this.directory.wantsAny(o.org, FOLLOWED[o.kind], o.datasetId))) return;
    const fact = {
      id: factId(o),
      org: o.org,
      datasetId: o.datasetId,
      kind: o.kind,
      itemId: o.itemId,
      at: o.at,
    };
    await this.outbox.recordFacts([o.error ? { ...fact, error: o.error } : fact]);
  }
}
