import { invalid } from '../domain/errors';
import { statusOf } from '../domain/dataset';
import type { Plan } from '../domain/plan';
import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { AuthService } from './auth';
import type { Principal } from './principal';

export interface AllowanceUsage {
  limitType: 'fixed' | 'unlimited';
  limit?: number;
  remaining?: number;
}

export interface DatasetUsage {
  images: number;
  usage: Array<{ type: string; requests: number; credits: number }>;
  status?: 'pending' | 'published';
  deleted?: boolean;
}

/** The nested `usage` object of interface.md §3. */
export interface UsageReport {
  credits: AllowanceUsage & { used: number; month: number; year: number };
  images: AllowanceUsage & { processed: number; total: number; year: number };
  datasets: Record<string, DatasetUsage>;
  lastUpdated: string;
  requestCredits: Plan['requestCredits'];
}

/**
 * GET usage. Request metering is not built yet (issue 6): credits and per-type request counts
 * are reported as zero; image totals come from the live datasets.
 */
export class UsageService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly content: ContentStore,
    private readonly auth: AuthService,
    private readonly clock: () => Date,
  ) {}

  async report(
    p: Principal,
    org: string,
    q: { year?: number; month?: number },
  ): Promise<UsageReport> {
    await this.auth.requireOrgAdmin(p, org);
    const now = this.clock();
    const year = q.year ?? now.getUTCFullYear();
    const month = q.month ?? now.getUTCMonth() + 1;
    if (!Number.isInteger(year) || year < 2000 || year > 9999)
      throw invalid('year must be a 4-digit year', [
        { param: 'year', message: 'expected e.g. 2026' },
      ]);
    if (!Number.isInteger(month) || month < 1 || month > 12)
      throw invalid('month must be 1–12', [{ param: 'month', message: 'expected 1 to 12' }]);
    const o = (await this.accounts.getOrg(org))!;
    const datasets: Record<string, DatasetUsage> = {};
    let total = 0;
    for (const ds of await this.accounts.listDatasets(org)) {
      const counts = await this.content.counts(ds.id);
      total += counts.processed;
      datasets[ds.name] = { images: counts.processed, usage: [], status: statusOf(counts) };
    }
    for (const ds of await this.accounts.listDeletedDatasets(org)) {
      if (!(ds.name in datasets)) datasets[ds.name] = { images: 0, usage: [], deleted: true };
    }
    const allowance = (a: typeof o.plan.credits, used: number): AllowanceUsage =>
      a.limitType === 'fixed'
        ? { limitType: 'fixed', limit: a.limit, remaining: Math.max(0, (a.limit ?? 0) - used) }
        : { limitType: 'unlimited' };
    return {
      credits: { ...allowance(o.plan.credits, 0), used: 0, month, year },
      images: { ...allowance(o.plan.images, 0), processed: 0, total, year },
      datasets,
      lastUpdated: now.toISOString(),
      requestCredits: o.plan.requestCredits,
    };
  }
}
