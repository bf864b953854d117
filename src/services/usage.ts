import { invalid } from '../domain/errors';
import { statusOf } from '../domain/dataset';
import type { Plan } from '../domain/plan';
import type { UsageLedger } from '../ports/usage-ledger';
import { MICRO, toMicro } from './metering';
import type { AccountStore } from '../ports/account-store';
import type { ItemReader } from '../ports/item-reader';
import type { AuthService } from './auth';
import type { Principal } from './principal';

export interface AllowanceUsage {
  limitType: 'fixed' | 'unlimited';
  limit?: number;
  remaining?: number;
}

export interface DatasetUsage {
  name: string;
  images: number;
  usage: Array<{ type: string; requests: number; credits: number }>;
  status?: 'pending' | 'published';
  deleted?: boolean;
}

/** An organisation's usage of a month: credits that month, images that year, per dataset. */
export interface UsageView {
  credits: AllowanceUsage & { used: number; month: number; year: number };
  images: AllowanceUsage & { processed: number; total: number; year: number };
  /** Live datasets, then deleted ones whose name no live dataset has. */
  datasets: DatasetUsage[];
  lastUpdated: string;
  requestCredits: Plan['requestCredits'];
}

/** GET usage: request credits per month and images per year from the ledger (contract §8). */
export class UsageService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly content: ItemReader,
    private readonly auth: AuthService,
    private readonly ledger: UsageLedger,
    private readonly clock: () => Date,
  ) {}

  async report(
    p: Principal,
    org: string,
    q: { year?: number; month?: number },
  ): Promise<UsageView> {
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
    const [used, images] = await Promise.all([
      this.ledger.month(org, year, month),
      this.ledger.images(org, year),
    ]);
    const datasets = new Map<string, DatasetUsage>();
    const nameOf = new Map<string, string>();
    let total = 0;
    for (const ds of await this.accounts.listDatasets(org)) {
      const counts = await this.content.counts(ds.id);
      total += counts.processed;
      nameOf.set(ds.id, ds.name);
      datasets.set(ds.name, {
        name: ds.name,
        images: counts.processed,
        usage: [],
        status: statusOf(counts),
      });
    }
    for (const ds of await this.accounts.listDeletedDatasets(org)) {
      nameOf.set(ds.id, ds.name);
      if (!datasets.has(ds.name))
        datasets.set(ds.name, { name: ds.name, images: 0, usage: [], deleted: true });
    }
    // A deleted dataset and a new one of the same name share the entry: one line per type.
    for (const u of used.perDataset) {
      const entry = datasets.get(nameOf.get(u.datasetId) ?? u.datasetId);
      if (!entry) continue;
      const line = entry.usage.find((x) => x.type === u.type);
      if (line) {
        line.requests += u.requests;
        line.credits = (toMicro(line.credits) + u.micro) / MICRO;
      } else entry.usage.push({ type: u.type, requests: u.requests, credits: u.micro / MICRO });
    }
    const allowance = (a: typeof o.plan.credits, usedNow: number): AllowanceUsage =>
      a.limitType === 'fixed'
        ? { limitType: 'fixed', limit: a.limit, remaining: Math.max(0, (a.limit ?? 0) - usedNow) }
        : { limitType: 'unlimited' };
    const credits = used.micro / MICRO;
    const newest = Math.max(used.lastAt ?? 0, images.lastAt ?? 0);
    return {
      credits: { ...allowance(o.plan.credits, credits), used: credits, month, year },
      images: {
        ...allowance(o.plan.images, images.processed),
        processed: images.processed,
        total,
        year,
      },
      datasets: [...datasets.values()],
      // The newest event counted; with none yet, the moment of this report.
      lastUpdated: new Date(newest > 0 ? newest : now.getTime()).toISOString(),
      requestCredits: o.plan.requestCredits,
    };
  }
}
