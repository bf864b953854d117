import type { DisabledReason, Webhook, WebhookState } from '../domain/webhook';

/**
 * The registered webhooks of every organisation (contract §17). Shared like all state (§12):
 * any API host registers, any worker reads the directory and disables.
 */
export interface WebhookStore {
  /** Adds `w` unless its organisation already has `maxPerOrg`; false then. */
  create(w: Webhook, maxPerOrg: number): Promise<boolean>;
  /** An organisation's webhooks, oldest first. */
  list(org: string): Promise<Webhook[]>;
  get(org: string, id: string): Promise<Webhook | undefined>;
  /** Removes it (its deliveries are the outbox's); false when there was none. */
  delete(org: string, id: string): Promise<boolean>;
  /** Sets the state (and why); a webhook deleted meanwhile stays deleted. */
  setState(id: string, state: WebhookState, reason?: DisabledReason): Promise<void>;
  /** Every webhook of the installation, any state: the directory workers route events by. */
  all(): Promise<Webhook[]>;
}
