import { AppError, invalid } from '../domain/errors';
import { assertOrgName } from '../domain/names';
import { parsePlan, type Plan, type PlanInput } from '../domain/plan';
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

export interface CreateOrganisation {
  name: string;
  /** Absent parts take their defaults. */
  plan?: PlanInput | null;
}

/** A new organisation and its first token, which is shown only here. */
export interface CreatedOrganisation {
  organisation: OrganisationView;
  token: string;
}

export class OrganisationService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly auth: AuthService,
    private readonly clock: () => Date,
  ) {}

  async create(p: Principal, cmd: CreateOrganisation): Promise<CreatedOrganisation> {
    this.auth.requireOperator(p);
    const name = assertOrgName(cmd.name);
    const plan = parsePlan(cmd.plan);
    const createdAt = this.clock();
    const record = { name, plan, createdAt: createdAt.toISOString() };
    if (!(await this.accounts.createOrg(record)))
      throw new AppError('conflict', `organisation '${name}' already exists`);
    const { token, record: tokenRecord } = issueToken('org', { org: name }, createdAt);
    await this.accounts.putToken(tokenRecord);
    return { organisation: record, token };
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
  async setPlan(p: Principal, org: string, input: PlanInput): Promise<OrganisationView> {
    this.auth.requireOperator(p);
    const plan = parsePlan(input);
    if (!(await this.accounts.updatePlan(org, plan)))
      throw new AppError('not_found', `organisation '${org}' not found`);
    const o = await this.accounts.getOrg(org);
    if (!o) throw new AppError('not_found', `organisation '${org}' not found`);
    return { name: o.name, plan, createdAt: o.createdAt };
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
