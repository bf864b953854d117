import { AppError, invalid } from '../domain/errors';
import { assertOrgName } from '../domain/names';
import { parsePlan, type Plan } from '../domain/plan';
import type { AccountStore } from '../ports/account-store';
import type { AuthService } from './auth';
import type { Principal } from './principal';
import { issueToken } from './tokens';

export interface TokenView {
  prefix: string;
  createdAt: string;
}

export interface OrganisationView {
  name: string;
  plan: Plan;
  createdAt: string;
}

export class OrganisationService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly auth: AuthService,
    private readonly clock: () => Date,
  ) {}

  async create(
    p: Principal,
    body: unknown,
  ): Promise<{ organisation: { name: string; plan: Plan }; token: string }> {
    this.auth.requireOperator(p);
    const b = (typeof body === 'object' && body !== null ? body : {}) as {
      name?: unknown;
      plan?: unknown;
    };
    const name = assertOrgName(b.name);
    const plan = parsePlan(b.plan);
    const now = this.clock();
    if (!(await this.accounts.createOrg({ name, plan, createdAt: now.toISOString() })))
      throw new AppError('conflict', `organisation '${name}' already exists`);
    const { token, record } = issueToken('org', { org: name }, now);
    await this.accounts.putToken(record);
    return { organisation: { name, plan }, token };
  }

  async get(p: Principal, org: string): Promise<OrganisationView> {
    await this.auth.requireOrgAdmin(p, org, { allowOperator: true });
    const o = await this.accounts.getOrg(org);
    if (!o) throw new AppError('not_found', `organisation '${org}' not found`);
    return { name: o.name, plan: o.plan, createdAt: o.createdAt };
  }

  /**
   * Operator only: a new plan for an organisation (e.g. a raised image limit; items postponed
   * by the old one are processed at the next recovery sweep).
   */
  async setPlan(p: Principal, org: string, body: unknown): Promise<{ name: string; plan: Plan }> {
    this.auth.requireOperator(p);
    const raw =
      typeof body === 'object' && body !== null ? (body as { plan?: unknown }).plan : undefined;
    if (raw === undefined)
      throw invalid('body must be { "plan": { … } }', [{ field: 'plan', message: 'required' }]);
    const plan = parsePlan(raw);
    if (!(await this.accounts.updatePlan(org, plan)))
      throw new AppError('not_found', `organisation '${org}' not found`);
    return { name: org, plan };
  }

  /** A new org token; the operator may issue one too (e.g. when all were lost). */
  async issueToken(p: Principal, org: string): Promise<TokenView & { token: string }> {
    await this.auth.requireOrgAdmin(p, org, { allowOperator: true });
    const { token, record } = issueToken('org', { org }, this.clock());
    await this.accounts.putToken(record);
    return { token, prefix: record.prefix, createdAt: record.createdAt };
  }

  async listTokens(p: Principal, org: string): Promise<TokenView[]> {
    await this.auth.requireOrgAdmin(p, org, { allowOperator: true });
    return (await this.accounts.listTokens(org)).map((t) => ({
      prefix: t.prefix,
      createdAt: t.createdAt,
    }));
  }

  async revokeToken(p: Principal, org: string, prefix: string): Promise<void> {
    await this.auth.requireOrgAdmin(p, org, { allowOperator: true });
    if (!/^org_[A-Za-z0-9]{12}$/.test(prefix))
      throw invalid('token prefix must look like org_XXXXXXXXXXXX', [
        { param: 'prefix', message: 'malformed prefix' },
      ]);
    if (!(await this.accounts.deleteToken(org, prefix)))
      throw new AppError('not_found', `token '${prefix}' not found`);
  }
}
