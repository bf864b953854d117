import type { Logger } from 'pino';
import { AppError } from '../domain/errors';
import type { Dataset } from '../domain/dataset';
import type { RequestFacts } from '../domain/report';
import type { RequestType } from '../domain/plan';
import type { Organisation } from '../ports/account-store';
import type { PlanReads } from './plans';
import type { EventLog } from '../ports/event-log';
import type { ChargeReceipt, UsageLedger } from '../ports/usage-ledger';
import type { Principal } from './principal';

export const MICRO = 1_000_000;
export const toMicro = (credits: number): number => Math.round(credits * MICRO);

/** Charge records and event writes in flight at most before a request waits for its own. */
const MAX_PENDING = 20_000;

/** After a 402, an organisation's requests are charged before any work for this long. */
const REFUSED_MEMORY_MS = 2000;

/** A request's charge, started before its dataset was read (see MeteringService.upfront). */
export interface EarlyCharge {
  readonly org: string;
  readonly datasetId: string;
  readonly type: RequestType;
  /** Undefined when the plan has a fixed credit limit: billed() charges then, as the work starts. */
  readonly receipt: Promise<ChargeReceipt | undefined>;
  /** Set once billed() has used it; one left untaken when the request ends is refunded. */
  taken: boolean;
}

/**
 * Charges Vision API requests against the organisation's plan (contract §8). Every transport
 * goes through here, so REST and GraphQL count alike, and each GraphQL alias of a billable
 * field is its own request. Requests that count are written to the event log with their `v`.
 */
export class MeteringService {
  /** Organisations refused recently, and until when to charge them before working. */
  private readonly refused = new Map<string, number>();
  /** Charge records and event-log writes in flight: shutdown waits for them (drain). */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly plans: PlanReads,
    private readonly ledger: UsageLedger,
    private readonly events: EventLog,
    private readonly log: Logger,
    private readonly now: () => number,
    /** Told of every charge against a fixed package (usage.threshold events). */
    private readonly usage?: { nudge(org: string, kind: 'credits', refusedAt?: number): void },
  ) {}

  private async organisation(name: string): Promise<Organisation> {
    const org = await this.plans.get(name);
    if (!org) throw new AppError('not_found', `organisation '${name}' not found`);
    return org;
  }

  private async charge(ds: Pick<Dataset, 'org' | 'id'>, type: RequestType): Promise<ChargeReceipt> {
    const org = await this.organisation(ds.org);
    const at = this.now();
    const credits = org.plan.requestCredits[type];
    const charge = { org: org.name, datasetId: ds.id, type, micro: toMicro(credits), at };
    const limit = org.plan.credits.limitType === 'fixed' ? org.plan.credits.limit : undefined;
    // Admitted from credits this process holds, or with no limit to decide against, the
    // request need not wait for the record.
    const admitted = await this.ledger.admit(
      charge,
      limit === undefined ? undefined : toMicro(limit),
    );
    if (admitted) {
      // Records wait for a batch; past MAX_PENDING in flight (the store is slow) a request
      // waits for its own, so what is held in memory stays bounded.
      if (this.pending.size >= MAX_PENDING) await admitted.recorded.catch(() => undefined);
      // shutdown waits for it (drain), so the record is written before the stores close
      this.track(
        admitted.recorded.then(
          () => {
            if (limit !== undefined) this.usage?.nudge(org.name, 'credits');
          },
          (err: unknown) =>
            this.log.error(
              { err, org: org.name, type },
              'charge of an answered request not recorded',
            ),
        ),
      );
      return admitted.receipt;
    }
    if (limit === undefined) throw new Error('a charge without a limit was refused');
    this.usage?.nudge(org.name, 'credits', limit);
    this.refused.set(org.name, at + REFUSED_MEMORY_MS);
    const d = new Date(at);
    throw new AppError(
      'payment_required',
      `the fixed package of ${limit} credits for ${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')} is used up (a ${type} request costs ${credits})`,
    );
  }

  /**
   * Runs a Vision API request with its charge started at once, before the dataset is read and
   * the request checked: the plan read and the charge's decision then overlap all of that
   * work, not only the engine's.
   * `body` hands the charge to billed(); a request that fails before is refunded before it
   * answers, so it never counts. Only plans without a fixed credit limit are charged this
   * early: their charges are never refused, so a failing request's brief hold can never turn
   * another request away, while a fixed package keeps admitting exactly R (contract §8).
   */
  async upfront<T>(
    p: Principal,
    org: string,
    type: RequestType,
    body: (early?: EarlyCharge) => Promise<T>,
    /** A scoped token names no dataset: the one this process last saw under the request's name. */
    datasetHint?: string,
  ): Promise<T> {
    // Any other caller is refused by the dataset lookup in body; nothing to start for it. A
    // charge started on a wrong hint is not taken by billed() and is refunded below.
    const datasetId =
      p.kind === 'dataset' && p.org === org
        ? p.datasetId
        : p.kind === 'scoped'
          ? datasetHint
          : undefined;
    const early = datasetId !== undefined ? this.early(org, datasetId, type) : undefined;
    try {
      return await body(early);
    } finally {
      if (early && !early.taken) await this.release(early);
    }
  }

  private early(org: string, datasetId: string, type: RequestType): EarlyCharge {
    const receipt = this.organisation(org).then((o) =>
      o.plan.credits.limitType === 'fixed' ? undefined : this.charge({ org, id: datasetId }, type),
    );
    // Observed at once: body's own error is what the request answers if both fail.
    receipt.catch(() => undefined);
    return { org, datasetId, type, receipt, taken: false };
  }

  private async release(early: EarlyCharge): Promise<void> {
    const receipt = await early.receipt.catch(() => undefined);
    if (receipt) await this.refund(receipt);
  }

  /**
   * Runs a billable request: only a 2xx counts, and a 402 is answered instead of any result.
   * The charge's decision runs alongside the work, so metering adds no latency; the work's
   * result is used only once the charge is admitted, and a failed request is refunded. An organisation refused in the last moments is charged
   * first, so a spent package does not keep costing the engine work. `facts` describes the
   * result for the analytics report; `early` is the charge upfront() started for this request.
   */
  async billed<T>(
    ds: Dataset,
    type: RequestType,
    vars: Record<string, string>,
    run: () => Promise<T>,
    facts?: (result: T) => RequestFacts,
    early?: EarlyCharge,
  ): Promise<T> {
    const mine =
      early &&
      !early.taken &&
      early.org === ds.org &&
      early.datasetId === ds.id &&
      early.type === type;
    if (mine) early.taken = true;
    const started = mine ? early.receipt : Promise.resolve(undefined);
    let result: T;
    if ((this.refused.get(ds.org) ?? 0) > this.now()) {
      const receipt = (await started) ?? (await this.charge(ds, type));
      this.refused.delete(ds.org);
      result = await this.refundOnFailure(receipt, run());
    } else {
      const work = run();
      // Observed at once: a failure while the charge is in flight must not count as unhandled.
      work.catch(() => undefined);
      const receipt = (await started) ?? (await this.charge(ds, type));
      result = await this.refundOnFailure(receipt, work);
    }
    this.record(ds, type, vars, facts?.(result));
    return result;
  }

  private async refundOnFailure<T>(receipt: ChargeReceipt, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (e) {
      await this.refund(receipt);
      throw e;
    }
  }

  /**
   * Takes a failed request's charge back. One recorded after the answer is refunded after its
   * record, in the background (shutdown waits for it): the failure need not wait for a batch.
   * A refund that fails is logged; the request still answers its own error.
   */
  private async refund(receipt: ChargeReceipt): Promise<void> {
    const p = this.ledger
      .refund(receipt)
      .catch((err: unknown) =>
        this.log.error(
          { err, org: receipt.charge.org, type: receipt.charge.type },
          'charge of a failed request not refunded',
        ),
      );
    if (receipt.leased) this.track(p);
    else await p;
  }

  /**
   * The event log is for analytics, not billing (the ledger write above is what a 402 rests
   * on): the response does not wait for it. Appends are batched by the log; a failed one is
   * logged, and shutdown waits for those in flight.
   */
  private record(
    ds: Dataset,
    type: RequestType,
    vars: Record<string, string>,
    facts: RequestFacts | undefined,
  ): void {
    const p = this.events
      .append([
        {
          org: ds.org,
          datasetId: ds.id,
          kind: 'request',
          type,
          at: this.now(),
          ...(Object.keys(vars).length ? { vars } : {}),
          ...(facts ? { facts } : {}),
        },
      ])
      .catch((err: unknown) => this.log.warn({ err, type }, 'request event not logged'));
    this.track(p);
  }

  private track(p: Promise<void>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  /** Waits for charge records and event-log writes in flight (shutdown). */
  async drain(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}
