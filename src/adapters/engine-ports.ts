import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { DuplicateStore } from '../ports/duplicate-store';
import type { EventLog } from '../ports/event-log';
import type { EventOutbox } from '../ports/event-outbox';
import type { ItemCountsRollup } from '../ports/item-counts';
import type { KeyStore } from '../ports/key-store';
import type { RateCounter } from '../ports/rate-counter';
import type { SearchEngine } from '../ports/search-engine';
import type { TuningStore } from '../ports/tuning-store';
import type { UsageLedger } from '../ports/usage-ledger';
import type { WebhookStore } from '../ports/webhook-store';

/** Every port with state, as one engine provides them (embeddedPorts, esPorts). */
export interface EnginePorts {
  accounts: AccountStore;
  content: ContentStore;
  engine: SearchEngine;
  ledger: UsageLedger;
  events: EventLog;
  /** The background roll-up of the event log into items' popularity and purchases. */
  counts: ItemCountsRollup;
  keys: KeyStore;
  /** Per-key request allowances per minute (contract §16 `rate`). */
  rates: RateCounter;
  /** Registered webhooks (contract §17). */
  webhooks: WebhookStore;
  /** Webhook events on their way out: facts, deliveries, marks (contract §17). */
  outbox: EventOutbox;
  /** The near-duplicate report's neighbours, dismissals and pass state (contract §18). */
  duplicates: DuplicateStore;
  /** Tuned similarity's fitted projections and fitting lease (contract §20). */
  tuning: TuningStore;
}
