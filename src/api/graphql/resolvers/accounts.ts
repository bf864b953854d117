import { Arg, Ctx, FieldResolver, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import type { GqlContext } from '../context';
import { requestCredits, toDataset, toPlan } from '../map';
import { CreatedOrganisation, IssuedToken, OrgToken, Organisation, Viewer } from '../types/account';
import { Dataset } from '../types/dataset';
import type { DatasetStatus, LimitType, RequestType, TokenKind } from '../types/enums';
import { PlanInput } from '../types/inputs';
import { Usage } from '../types/usage';

/** GraphQL input objects carry a null prototype and explicit nulls; the domain parsers expect JSON. */
export const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v ?? null));

@Resolver()
export class AccountResolver {
  @Query(() => Viewer, { description: 'What the Authorization header identifies.' })
  async viewer(@Ctx() ctx: GqlContext): Promise<Viewer> {
    const d = await ctx.c.auth.describe(await ctx.principal());
    return { ...d, kind: d.kind as TokenKind };
  }

  @Query(() => Organisation, { description: 'Organisation token (or the operator token).' })
  async organisation(@Arg('name', () => String) name: string, @Ctx() ctx: GqlContext) {
    const o = await ctx.c.organisations.get(await ctx.principal(), name);
    return { name: o.name, plan: toPlan(o.plan), createdAt: o.createdAt };
  }

  @Mutation(() => CreatedOrganisation, { description: 'Operator token.' })
  async createOrganisation(
    @Arg('name', () => String) name: string,
    @Arg('plan', () => PlanInput, { nullable: true }) plan: PlanInput | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<CreatedOrganisation> {
    const body = plan ? { name, plan: plain(plan) } : { name };
    const p = await ctx.principal();
    const r = await ctx.c.organisations.create(p, body);
    const o = await ctx.c.organisations.get(p, r.organisation.name);
    return {
      organisation: { name: o.name, plan: toPlan(o.plan), createdAt: o.createdAt },
      token: r.token,
    };
  }

  @Mutation(() => Organisation, {
    description: 'Operator token: replaces the plan (e.g. raises an image limit).',
  })
  async setPlan(
    @Arg('organisation', () => String) organisation: string,
    @Arg('plan', () => PlanInput) plan: PlanInput,
    @Ctx() ctx: GqlContext,
  ): Promise<Organisation> {
    const p = await ctx.principal();
    await ctx.c.organisations.setPlan(p, organisation, { plan: plain(plan) });
    const o = await ctx.c.organisations.get(p, organisation);
    return { name: o.name, plan: toPlan(o.plan), createdAt: o.createdAt };
  }

  @Mutation(() => IssuedToken)
  async issueOrganisationToken(
    @Arg('organisation', () => String) organisation: string,
    @Ctx() ctx: GqlContext,
  ): Promise<IssuedToken> {
    const r = await ctx.c.organisations.issueToken(await ctx.principal(), organisation);
    return { token: r.token, prefix: r.prefix, createdAt: r.createdAt };
  }

  @Mutation(() => Boolean)
  async revokeOrganisationToken(
    @Arg('organisation', () => String) organisation: string,
    @Arg('prefix', () => String) prefix: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.c.organisations.revokeToken(await ctx.principal(), organisation, prefix);
    return true;
  }
}

@Resolver(() => Organisation)
export class OrganisationFields {
  @FieldResolver(() => [OrgToken])
  async tokens(@Root() o: Organisation, @Ctx() ctx: GqlContext): Promise<OrgToken[]> {
    const list = await ctx.c.organisations.listTokens(await ctx.principal(), o.name);
    return list.map((t) => ({ prefix: t.prefix, createdAt: t.createdAt }));
  }

  @FieldResolver(() => [Dataset])
  async datasets(@Root() o: Organisation, @Ctx() ctx: GqlContext): Promise<Dataset[]> {
    const rc = await ctx.request();
    const list = await ctx.c.datasets.list(rc, o.name);
    return list.map((v) => toDataset(rc.baseUrl, v));
  }

  @FieldResolver(() => Dataset)
  async dataset(
    @Root() o: Organisation,
    @Arg('name', () => String) name: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const rc = await ctx.request();
    return toDataset(rc.baseUrl, await ctx.c.datasets.get(rc, o.name, name));
  }

  @FieldResolver(() => Usage, { description: 'Defaults to the current month.' })
  async usage(
    @Root() o: Organisation,
    @Arg('year', () => Int, { nullable: true }) year: number | undefined,
    @Arg('month', () => Int, { nullable: true }) month: number | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<Usage> {
    const r = await ctx.c.usage.report(await ctx.principal(), o.name, {
      year: year ?? undefined,
      month: month ?? undefined,
    });
    return {
      credits: { ...r.credits, limitType: r.credits.limitType as LimitType },
      images: { ...r.images, limitType: r.images.limitType as LimitType },
      datasets: Object.entries(r.datasets).map(([name, d]) => ({
        name,
        images: d.images,
        usage: d.usage.map((u) => ({ ...u, type: u.type as RequestType })),
        status: d.status as DatasetStatus | undefined,
        deleted: d.deleted === true,
      })),
      lastUpdated: r.lastUpdated,
      requestCredits: requestCredits(r.requestCredits),
    };
  }
}
