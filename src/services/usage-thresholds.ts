import type { Logger } from 'pino';
import { reachedThresholds, type Webhook } from '../domain/webhook';
import type { EventOutbox } from '../ports/event-outbox';
import type { UsageLedger } from '../ports/usage-ledger';
import { deliveryId, newDelivery } from './webhook-deliveries';
import type { PlanReads } from './plans';
import type { WebhookDirectory } from './webhook-directory';

const MICRO = 1_000_000;
/** A busy organisation's usage is read at most this often per kind and process. */
const CHECK_EVERY_MS = 2000;

export type UsageKind = 'credits' | 'images';

/**
 * usage.threshold events (contract §17): 80 % and 100 % of a fixed credit (month) or image
 * (year) package, once each per period and limit. Metering and workers nudge it as usage
 * grows; the batching process sweeps every organisation with such a webhook now and then, for
 * nudges lost in a crash and for plans changed. Deliveries are made (create-only, ids naming
 * the threshold) before the mark that says so, so a crash between sends it still, once.
 */
export class UsageThresholds {
  /** Per organisation and kind: the last check, and a check due at the end of its interval. */
  private readonly checks = new Map<
    string,
    { at: number; again?: NodeJS.Timeout; refusedAt?: number }
  >();
  private readonly running = new Set<Promise<void>>();
  /** Set by drain: the stores close next, so a late nudge (a job finishing) checks nothing. */
  private closed = false;

  constructor(
    private readonly directory: WebhookDirectory,
    private readonly outbox: EventOutbox,
    private readonly ledger: UsageLedger,
    private readonly plans: PlanReads,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  /**
   * Usage of `kind` grew, or a request was refused at the fixed limit `refusedAt`: checked at
   * once, then at most every CHECK_EVERY_MS per organisation and kind, with one check at the
   * end of each interval that had nudges, so the last growth of a burst is seen then and a
   * refused flood costs one read per interval.
   */
  nudge(org: string, kind: UsageKind, refusedAt?: number): void {
    if (this.closed) return;
    const key = `${org}\u0000${kind}`;
    const at = this.now();
    const state = this.checks.get(key);
    if (state && at - state.at < CHECK_EVERY_MS) {
      state.refusedAt = refusedAt ?? state.refusedAt;
      state.again ??= setTimeout(
        () => {
          state.again = undefined;
          this.checks.delete(key);
          this.nudge(org, kind, state.refusedAt);
        },
        Math.max(0, state.at + CHECK_EVERY_MS - at),
      );
      state.again.unref();
      return;
    }
    if (this.checks.size > 10_000) this.checks.clear();
    this.checks.set(key, { at });
    const p = this.check(org, kind, refusedAt)
      .catch((err: unknown) => this.log.warn({ err, kind }, 'usage threshold check failed'))
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }

  /** Checks both kinds for every organisation that has a usage.threshold webhook. */
  async sweep(): Promise<void> {
    const orgs = new Set((await this.directory.active()).filter(wantsUsage).map((w) => w.org));
    for (const org of orgs)
      for (const kind of ['credits', 'images'] as const) await this.check(org, kind);
  }

  async drain(): Promise<void> {
    this.closed = true;
    for (const c of this.checks.values()) if (c.again) clearTimeout(c.again);
    await Promise.all(this.running);
  }

  /**
   * A refusal counts as 100 % only if it was judged on the limit in force now: one by a process
   * whose plan copy is older than a raised limit says nothing about the new one.
   */
  async check(org: string, kind: UsageKind, refusedAt?: number): Promise<void> {
    const hooks = await this.directory.wanting(org, 'usage.threshold');
    if (!hooks.length) return;
    const plan = (await this.plans.get(org))?.plan;
    const allowance = plan?.[kind];
    const limit = allowance?.limitType === 'fixed' ? allowance.limit : undefined;
    if (limit === undefined) return;
    const at = this.now();
    const d = new Date(at);
    const period =
      kind === 'credits'
        ? `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`
        : `${d.getUTCFullYear()}`;
    const used =
      kind === 'credits'
        ? (await this.ledger.month(org, d.getUTCFullYear(), d.getUTCMonth() + 1)).micro / MICRO
        : (await this.ledger.images(org, d.getUTCFullYear())).processed;
    for (const percent of reachedThresholds(used, limit, refusedAt === limit)) {
      const mark = `usage:${org}:${kind}:${period}:${limit}:${percent}`;
      if (await this.outbox.hasMark(mark)) continue;
      const event = { type: 'usage.threshold', kind, percent, used, limit } as const;
      await this.outbox.enqueue(
        hooks.map((h) => newDelivery(h, deliveryId(h.id, mark), at, event)),
        [],
      );
      await this.outbox.mark(mark, at);
    }
  }
}

const wantsUsage = (w: Webhook): boolean => w.events.includes('usage.threshold');
