import crypto from 'node:crypto';
import { webhookBody, type Delivery, type Webhook, type WebhookEventData } from '../domain/webhook';

/** Deterministic ids: a batch made again (a holder died after writing it) is the same delivery. */
export function deliveryId(...parts: Array<string | number>): string {
  return `msg_${crypto.createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 27).replace(/[-_]/g, 'x')}`;
}

export function newDelivery(
  hook: Webhook,
  id: string,
  at: number,
  event: WebhookEventData,
): Delivery {
  return {
    id,
    webhookId: hook.id,
    org: hook.org,
    type: event.type,
    body: webhookBody(hook.org, at, event),
    state: 'pending',
    attempts: 0,
    lastStatus: null,
    nextAttemptAt: at,
    createdAt: at,
  };
}
