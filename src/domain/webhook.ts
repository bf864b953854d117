import { LIMITS } from './limits';

/**
 * Webhooks and their deliveries (contract §17): the shapes every engine stores and the pure
 * rules of delivery (schedule, Retry-After, thresholds, batching). Signing and transport live
 * outside the domain.
 */

export const WEBHOOK_EVENTS = [
  'items.processed',
  'items.failed',
  'dataset.published',
  'usage.threshold',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

export type WebhookState = 'active' | 'disabled';
/** Why a webhook stopped: the receiver answered 410, or every scheduled attempt failed. */
export type DisabledReason = 'gone' | 'retries_exhausted';

export interface Webhook {
  /** `wh_` + 20 base32 characters. */
  id: string;
  org: string;
  url: string;
  events: WebhookEventType[];
  /** Dataset ids it follows; undefined = every dataset of the organisation. */
  datasetIds?: string[];
  state: WebhookState;
  disabledReason?: DisabledReason;
  /** Random; the secret is derived from it and the server key, never stored. */
  salt: string;
  createdAt: number;
}

/** One processed or failed item, recorded by the worker before its job is acknowledged. */
export interface ItemFact {
  /** Deterministic: the same processing gives the same id, so a redelivery adds nothing. */
  id: string;
  org: string;
  datasetId: string;
  kind: 'processed' | 'failed';
  itemId: string;
  at: number;
  error?: { code: string; message: string };
  /** Where the outbox keeps it, as `unbatchedFacts` read it (the outbox's own reference). */
  ref?: string;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface Delivery {
  /** `msg_` + 26 base32 characters: the `webhook-id` header, stable across retries. */
  id: string;
  webhookId: string;
  org: string;
  type: WebhookEventType;
  /** The exact JSON sent (and signed) at every attempt. */
  body: string;
  state: DeliveryState;
  attempts: number;
  lastStatus: number | null;
  lastError?: string;
  nextAttemptAt: number | null;
  createdAt: number;
  /** One attempt asked for by the retry endpoint: outside the schedule, never disables. */
  manual?: boolean;
}

/** What settling an attempt writes. */
export type DeliverySettlement = Pick<
  Delivery,
  'state' | 'attempts' | 'lastStatus' | 'lastError' | 'nextAttemptAt' | 'manual'
>;

/** Item ids (or errors) per delivery. */
export const WEBHOOK_BATCH = LIMITS.webhookBatch;
/** Deliveries kept per webhook (the log); pending ones are never dropped. */
export const DELIVERY_LOG = LIMITS.webhookDeliveryLog;
/** One attempt's whole exchange. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** Waits after attempts 1…7 (contract §17); the 8th failure disables the webhook. */
export const RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  24 * 3_600_000,
] as const;
export const MAX_DELIVERY_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
/** A receiver's Retry-After is honoured up to this long. */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** Seconds or an HTTP date, as milliseconds from `now`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now: number): number | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

/**
 * When the attempt after `attempts` failed ones is due, or undefined when none is left. A
 * receiver's Retry-After can only push it later, never sooner than the schedule; `scale`
 * divides the schedule (tests). Waits of 5 min and more get ±10 % jitter, so receivers that
 * failed together are not retried together.
 */
export function nextAttemptAt(
  attempts: number,
  now: number,
  opts: { retryAfterMs?: number; scale?: number; random?: () => number } = {},
): number | undefined {
  const base = RETRY_SCHEDULE_MS[attempts - 1];
  if (base === undefined) return undefined;
  const jitter = base >= 5 * 60_000 ? 1 + ((opts.random ?? Math.random)() * 0.2 - 0.1) : 1;
  const scheduled = (base * jitter) / (opts.scale ?? 1);
  return Math.round(now + Math.max(scheduled, opts.retryAfterMs ?? 0));
}

/** Percentages of a fixed package a usage.threshold event is sent for. */
export const USAGE_THRESHOLDS = [80, 100] as const;
export type UsageThreshold = (typeof USAGE_THRESHOLDS)[number];

/**
 * The thresholds `used` of `limit` has reached. A package is never overcharged, so usage can
 * stop just under 100 % (a 2-credit request with 1 credit left): a refusal counts as 100 %.
 */
export function reachedThresholds(used: number, limit: number, refused = false): UsageThreshold[] {
  if (limit <= 0) return [...USAGE_THRESHOLDS];
  return USAGE_THRESHOLDS.filter((p) => (p === 100 && refused) || used * 100 >= limit * p);
}

/** What each event's `data` holds besides the organisation (contract §17). */
export type WebhookEventData =
  | { type: 'items.processed'; dataset: string; ids: string[] }
  | {
      type: 'items.failed';
      dataset: string;
      errors: Array<{ id: string; code: string; message: string }>;
    }
  | {
      type: 'dataset.published';
      dataset: string;
      counts: { items: number; processed: number; pending: number; errors: number };
    }
  | {
      type: 'usage.threshold';
      kind: 'credits' | 'images';
      percent: UsageThreshold;
      used: number;
      limit: number;
    };

/** The exact bytes of an event: `{ type, timestamp, data: { organisation, … } }`. */
export function webhookBody(org: string, at: number, event: WebhookEventData): string {
  const { type, ...rest } = event;
  return JSON.stringify({
    type,
    timestamp: new Date(at).toISOString(),
    data: { organisation: org, ...rest },
  });
}
