import type { Logger } from 'pino';
import {
  DELIVERY_TIMEOUT_MS,
  nextAttemptAt,
  retryAfterMs,
  type Delivery,
  type DeliverySettlement,
  type Webhook,
} from '../domain/webhook';
import type { Metrics } from '../observability/metrics';
import type { EventOutbox } from '../ports/event-outbox';
import type { SendOutcome, WebhookSender } from '../ports/webhook-sender';
import type { WebhookStore } from '../ports/webhook-store';
import type { WebhookDirectory } from '../services/webhook-directory';

/** A claimed delivery is this process's for this long: more than one attempt's timeout. */
const CLAIM_MS = 30_000;
/** Attempts in flight per process, and per webhook, so one slow receiver holds up no other. */
const IN_FLIGHT = 32;
const IN_FLIGHT_PER_HOOK = 4;
/** Due deliveries read per look. */
const LOOK_LIMIT = 100;

export interface DelivererDeps {
  outbox: EventOutbox;
  store: WebhookStore;
  directory: WebhookDirectory;
  sender: WebhookSender;
  /** The headers of one signed attempt (Standard Webhooks 1.0). */
  sign: (hook: Webhook, d: Delivery, now: number) => Record<string, string>;
  now: () => number;
  log: Logger;
  owner: string;
  /** Divides the retry schedule (tests); 1 in production. */
  retryScale: number;
  metrics?: Metrics;
}

/**
 * Attempts due deliveries (contract §17). Every worker runs one; a delivery is claimed before
 * its attempt, so one process sends it at a time, and a claim left by a process that died
 * lapses after CLAIM_MS for any other to send it again under the same webhook-id.
 */
export class WebhookDeliverer {
  private readonly inFlight = new Map<string, number>();
  private total = 0;

  constructor(private readonly deps: DelivererDeps) {}

  /**
   * Starts the attempts due now (up to the in-flight bounds); resolves once all have ended,
   * with whether more may be due already (the bounds or the page left some unstarted).
   */
  async look(): Promise<boolean> {
    const { outbox, directory, now } = this.deps;
    if (this.total >= IN_FLIGHT) return false;
    const active = (await directory.active()).map((w) => w.id);
    const due = await outbox.due(now(), LOOK_LIMIT, active);
    const started: Array<Promise<void>> = [];
    for (const d of due) {
      if (this.total >= IN_FLIGHT) break;
      if ((this.inFlight.get(d.webhookId) ?? 0) >= IN_FLIGHT_PER_HOOK) continue;
      started.push(this.attempt(d));
    }
    await Promise.all(started);
    return due.length === LOOK_LIMIT || started.length < due.length;
  }

  private async attempt(d: Delivery): Promise<void> {
    this.total++;
    this.inFlight.set(d.webhookId, (this.inFlight.get(d.webhookId) ?? 0) + 1);
    try {
      await this.claimAndSend(d);
    } catch (err) {
      // the claim lapses and the delivery is attempted again; nothing is lost
      this.deps.log.warn({ err, delivery: d.id }, 'webhook attempt could not be recorded');
    } finally {
      this.total--;
      const n = (this.inFlight.get(d.webhookId) ?? 1) - 1;
      if (n) this.inFlight.set(d.webhookId, n);
      else this.inFlight.delete(d.webhookId);
    }
  }

  private async claimAndSend(due: Delivery): Promise<void> {
    const { outbox, now, owner } = this.deps;
    const start = now();
    const d = await outbox.claim(due.id, owner, start, start + CLAIM_MS);
    if (!d) return;
    // read fresh: a webhook deleted or disabled since the look is not sent to
    const hook = await this.deps.store.get(d.org, d.webhookId);
    if (!hook || (hook.state !== 'active' && !d.manual)) {
      // a deleted webhook's delivery is dropped with it; a disabled one's waits, unattempted
      await outbox.settle(d.id, owner, {
        state: hook ? d.state : 'failed',
        attempts: d.attempts,
        lastStatus: d.lastStatus,
        nextAttemptAt: hook ? d.nextAttemptAt : null,
        manual: false,
        ...(d.lastError !== undefined ? { lastError: d.lastError } : {}),
      });
      return;
    }
    const timer = this.deps.metrics?.webhookDeliveryDuration.startTimer();
    const outcome = await this.deps.sender.send(
      hook.url,
      this.deps.sign(hook, d, now()),
      d.body,
      DELIVERY_TIMEOUT_MS,
    );
    timer?.();
    const next = this.settlement(d, outcome, now());
    if (!(await outbox.settle(d.id, owner, next))) return;
    this.count(outcome, next);
    if ('status' in outcome && outcome.status === 410)
      await this.deps.store.setState(hook.id, 'disabled', 'gone');
    else if (next.state === 'failed' && !d.manual)
      await this.deps.store.setState(hook.id, 'disabled', 'retries_exhausted');
    else if (next.state === 'delivered' && d.manual && hook.state !== 'active')
      await this.deps.store.setState(hook.id, 'active');
    else return;
    this.deps.directory.invalidate();
  }

  /**
   * 2xx delivers; 410 fails at once; anything else (3xx, 4xx, 5xx, a timeout, a refused or
   * unreachable address) counts as a failed attempt and follows the schedule, later if the
   * receiver's Retry-After (on 429 and 5xx) asks; a manual attempt that fails stays failed.
   */
  private settlement(d: Delivery, o: SendOutcome, now: number): DeliverySettlement {
    const attempts = d.attempts + 1;
    const lastStatus = 'status' in o ? o.status : null;
    const base = { attempts, lastStatus, manual: false };
    const lastError = 'error' in o ? { lastError: o.error } : {};
    if (lastStatus !== null && lastStatus >= 200 && lastStatus < 300)
      return { ...base, state: 'delivered', nextAttemptAt: null };
    if (lastStatus === 410 || d.manual)
      return { ...base, ...lastError, state: 'failed', nextAttemptAt: null };
    const throttled = lastStatus !== null && (lastStatus === 429 || lastStatus >= 500);
    const wait = throttled && 'status' in o ? retryAfterMs(o.retryAfter, now) : undefined;
    const next = nextAttemptAt(attempts, now, {
      scale: this.deps.retryScale,
      ...(wait !== undefined ? { retryAfterMs: wait } : {}),
    });
    if (next === undefined) return { ...base, ...lastError, state: 'failed', nextAttemptAt: null };
    return { ...base, ...lastError, state: 'pending', nextAttemptAt: next };
  }

  private count(o: SendOutcome, next: DeliverySettlement): void {
    const outcome =
      'error' in o && o.error === 'forbidden_address'
        ? 'refused'
        : next.state === 'delivered'
          ? 'delivered'
          : next.state === 'failed'
            ? 'failed'
            : 'retried';
    this.deps.metrics?.webhookDeliveries.inc({ outcome });
  }
}
