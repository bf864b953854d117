import crypto from 'node:crypto';
import { AppError, invalid, notFound } from '../domain/errors';
import { LIMITS } from '../domain/limits';
import type { Delivery, Webhook, WebhookEventType } from '../domain/webhook';
import { checkWebhookInput, type WebhookInput } from '../domain/webhook-input';
import type { AccountStore } from '../ports/account-store';
import type { EventOutbox } from '../ports/event-outbox';
import type { WebhookSender } from '../ports/webhook-sender';
import type { WebhookStore } from '../ports/webhook-store';
import type { AuthService } from './auth';
import type { Principal } from './principal';
import type { WebhookDirectory } from './webhook-directory';
import { webhookSecret } from './webhook-signing';

/** A webhook as the API shows it. */
export interface WebhookView {
  id: string;
  url: string;
  events: WebhookEventType[];
  /** Names of the datasets it follows (those still live); null = every dataset. */
  datasets: string[] | null;
  state: Webhook['state'];
  disabledReason?: Webhook['disabledReason'];
  createdAt: Date;
}

export interface DeliveryView {
  id: string;
  type: WebhookEventType;
  state: Delivery['state'];
  attempts: number;
  lastStatus: number | null;
  lastError?: string;
  nextAttemptAt: Date | null;
  createdAt: Date;
}

const view = (d: Delivery): DeliveryView => ({
  id: d.id,
  type: d.type,
  state: d.state,
  attempts: d.attempts,
  lastStatus: d.lastStatus,
  ...(d.lastError !== undefined ? { lastError: d.lastError } : {}),
  nextAttemptAt:
    d.state === 'pending' && d.nextAttemptAt !== null ? new Date(d.nextAttemptAt) : null,
  createdAt: new Date(d.createdAt),
});

/**
 * Webhook management (contract §17), for an organisation's own tokens. A secret is derived
 * from the server key and a stored salt, never stored: shown once at registration, and any
 * worker can sign with it.
 */
export class WebhookService {
  constructor(
    private readonly auth: AuthService,
    private readonly accounts: AccountStore,
    private readonly store: WebhookStore,
    private readonly outbox: EventOutbox,
    private readonly sender: WebhookSender,
    private readonly directory: WebhookDirectory,
    private readonly serverKey: Buffer,
    private readonly now: () => number,
  ) {}

  async create(
    p: Principal,
    org: string,
    input: WebhookInput,
  ): Promise<{ webhook: WebhookView; secret: string }> {
    await this.auth.requireOrgAdmin(p, org);
    const checked = checkWebhookInput(input);
    const datasetIds = checked.datasets && (await this.datasetIds(org, checked.datasets));
    const refused = await this.sender.checkDestination(checked.url);
    if (refused)
      throw invalid('the webhook URL is not allowed', [
        { field: 'url', value: checked.url, message: refused },
      ]);
    const hook: Webhook = {
      id: `wh_${crypto.randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`,
      org,
      url: checked.url,
      events: checked.events,
      ...(datasetIds ? { datasetIds } : {}),
      state: 'active',
      salt: crypto.randomBytes(16).toString('base64url'),
      createdAt: this.now(),
    };
    if (!(await this.store.create(hook, LIMITS.webhooksPerOrg)))
      throw invalid(`an organisation may register at most ${LIMITS.webhooksPerOrg} webhooks`, [
        { field: 'url', message: 'delete a webhook first' },
      ]);
    this.directory.invalidate();
    return {
      webhook: await this.view(hook),
      secret: webhookSecret(this.serverKey, hook.id, hook.salt),
    };
  }

  async list(p: Principal, org: string): Promise<WebhookView[]> {
    await this.auth.requireOrgAdmin(p, org);
    return Promise.all((await this.store.list(org)).map((w) => this.view(w)));
  }

  async get(p: Principal, org: string, id: string): Promise<WebhookView> {
    return this.view(await this.hook(p, org, id));
  }

  async delete(p: Principal, org: string, id: string): Promise<void> {
    await this.auth.requireOrgAdmin(p, org);
    if (!(await this.store.delete(org, id))) throw notFound(`webhook '${id}'`);
    this.directory.invalidate();
    await this.outbox.forget(id);
  }

  /** The newest deliveries first (at most the log's length). */
  async deliveries(p: Principal, org: string, id: string, limit?: number): Promise<DeliveryView[]> {
    await this.hook(p, org, id);
    const n = limit ?? LIMITS.webhookDeliveryLog;
    if (!Number.isInteger(n) || n < 1 || n > LIMITS.webhookDeliveryLog)
      throw invalid(`limit must be 1–${LIMITS.webhookDeliveryLog}`, [
        { param: 'limit', message: `expected 1 to ${LIMITS.webhookDeliveryLog}` },
      ]);
    return (await this.outbox.list(id, n)).map(view);
  }

  /**
   * One more attempt, now: a pending delivery is made due; a delivered or failed one is
   * attempted once outside the schedule. It may target a disabled webhook: a delivery that
   * succeeds then makes the webhook active again.
   */
  async retry(p: Principal, org: string, id: string, deliveryId: string): Promise<void> {
    await this.hook(p, org, id);
    if (!(await this.outbox.retry(id, deliveryId, this.now())))
      throw notFound(`delivery '${deliveryId}' of webhook '${id}'`);
  }

  private async hook(p: Principal, org: string, id: string): Promise<Webhook> {
    await this.auth.requireOrgAdmin(p, org);
    const hook = await this.store.get(org, id);
    if (!hook) throw notFound(`webhook '${id}'`);
    return hook;
  }

  private async datasetIds(org: string, names: readonly string[]): Promise<string[]> {
    const found = await Promise.all(names.map((n) => this.accounts.getDataset(org, n)));
    const unknown = names.filter((_, i) => !found[i]);
    if (unknown.length)
      throw new AppError(
        'not_found',
        `dataset${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')} not found`,
        unknown.map((n) => ({ field: 'datasets', value: n, message: 'no such dataset' })),
      );
    return found.map((d) => d!.id);
  }

  private async view(w: Webhook): Promise<WebhookView> {
    const datasets = w.datasetIds
      ? (await Promise.all(w.datasetIds.map((id) => this.accounts.getDatasetById(id)))).flatMap(
          (d) => (d ? [d.name] : []),
        )
      : null;
    return {
      id: w.id,
      url: w.url,
      events: w.events,
      datasets,
      state: w.state,
      ...(w.disabledReason ? { disabledReason: w.disabledReason } : {}),
      createdAt: new Date(w.createdAt),
    };
  }
}
