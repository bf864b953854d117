import { PLAN_TTL_MS } from '../domain/plan';
import { RecentReads } from '../lib/recent-reads';
import type { AccountStore, Organisation } from '../ports/account-store';

/**
 * Organisations (their plans) as this process read them in the last PLAN_TTL_MS, shared by
 * metering (pricing a request, its fixed credit limit) and the workers (an image allowance), so
 * a process reads a plan once a second however many requests and images it serves. A plan
 * changed on any host reaches every host within PLAN_TTL_MS; the counts themselves are never
 * kept.
 */
export class PlanReads {
  private readonly recent: RecentReads<Organisation>;

  constructor(
    private readonly accounts: AccountStore,
    now: () => number,
  ) {
    this.recent = new RecentReads(PLAN_TTL_MS, now);
  }

  get(org: string): Promise<Organisation | undefined> {
    return this.recent.get(org, () => this.accounts.getOrg(org));
  }

  /** Read now, whatever this process knows (a decision that must not rest on a stale plan). */
  fresh(org: string): Promise<Organisation | undefined> {
    this.recent.forget(org);
    return this.get(org);
  }
}
