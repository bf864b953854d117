import { AppError } from '../domain/errors';
import type { Dataset } from '../domain/dataset';
import type { RequestType } from '../domain/plan';
import type { AccountStore } from '../ports/account-store';
import type { UsageLedger } from '../ports/usage-ledger';

export const MICRO = 1_000_000;
export const toMicro = (credits: number): number => Math.round(credits * MICRO);

export interface Charge {
  /** Call when the request fails after it was charged: only 2xx responses count. */
  refund(): Promise<void>;
}

/**
 * Charges Vision API requests against the organisation's plan (contract §8). Every transport
 * goes through here, so REST and GraphQL count alike, and each GraphQL alias of a billable
 * field is its own request.
 */
export class MeteringService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly ledger: UsageLedger,
    private readonly now: () => number,
  ) {}

  async charge(ds: Dataset, type: RequestType, vars: Record<string, string>): Promise<Charge> {
    const org = await this.accounts.getOrg(ds.org);
    if (!org) throw new AppError('not_found', `organisation '${ds.org}' not found`);
    const at = this.now();
    const credits = org.plan.requestCredits[type];
    const limit = org.plan.credits.limitType === 'fixed' ? org.plan.credits.limit : undefined;
    const id = await this.ledger.charge(
      {
        org: org.name,
        datasetId: ds.id,
        type,
        micro: toMicro(credits),
        at,
        ...(Object.keys(vars).length ? { vars } : {}),
      },
      limit === undefined ? undefined : toMicro(limit),
    );
    if (id === undefined) {
      const d = new Date(at);
      throw new AppError(
        'payment_required',
        `the fixed package of ${limit} credits for ${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')} is used up (a ${type} request costs ${credits})`,
      );
    }
    return { refund: () => this.ledger.refund(id) };
  }

  /** Runs a billable request: charged first (402 before any work), refunded if it fails. */
  async billed<T>(
    ds: Dataset,
    type: RequestType,
    vars: Record<string, string>,
    run: () => Promise<T>,
  ): Promise<T> {
    const charge = await this.charge(ds, type, vars);
    try {
      return await run();
    } catch (e) {
      await charge.refund();
      throw e;
    }
  }
}
