import { Arg, Ctx, FieldResolver, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import type { GqlContext } from '../context';
import { requestCredits, toDataset, toPlan } from '../map';
import { CreatedOrganisation, IssuedToken, OrgToken, Organisation, Viewer } from '../types/account';
import { Dataset } from '../types/dataset';
import type { DatasetStatus, LimitType, RequestType, TokenKind } from '../types/enums';
import { PlanInput } from '../types/inputs';
import { Usage } from '../types/usage';

@Resolver()
export class AccountResolver {
  @Query(() => Viewer, { description: 'What the Authorization header identifies.' })
  async viewer(@Ctx() ctx: GqlContext): Promise<Viewer> {
    const d = await ctx.services.auth.describe(await ctx.principal());
    return { ...d, kind: d.kind as TokenKind };
  }

  @Query(() => Organisation, { description: 'Organisation token (or the operator token).' })
  async organisation(@Arg('name', () => String) name: string, @Ctx() ctx: GqlContext) {
    const o = await ctx.services.organisations.get(await ctx.principal(), name);
    return { name: o.name, plan: toPlan(o.plan), createdAt: o.createdAt };
  }

  @Mutation(() => CreatedOrganisation, { description: 'Operator token.' })
  async createOrganisation(
    @Arg('name', () => String) name: string,
    @Arg('plan', () => PlanInput, { nullable: true }) plan: PlanInput | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<CreatedOrganisation> {
    const r = await ctx.services.organisations.create(await ctx.principal(), { name, plan });
    const o = r.organisation;
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
    const o = await ctx.services.organisations.setPlan(await ctx.principal(), organisation, plan);
    return { name: o.name, plan: toPlan(o.plan), createdAt: o.createdAt };
  }

  @Mutation(() => IssuedToken)
  async issueOrganisationToken(
    @Arg('organisation', () => String) organisation: string,
    @Ctx() ctx: GqlContext,
  ): Promise<IssuedToken> {
    const r = await ctx.services.organisations.issueToken(await ctx.principal(), organisation);
    return { token: r.token, prefix: r.prefix, createdAt: r.createdAt };
  }

  @Mutation(() => Boolean)
  async revokeOrganisationToken(
    @Arg('organisation', () => String) organisation: string,
    @Arg('prefix', () => String) prefix: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.organisations.revokeToken(await ctx.principal(), organisation, prefix);
    return true;
  }
}

@Resolver(() => Organisation)
export class OrganisationFields {
  @FieldResolver(() => [OrgToken])
  async tokens(@Root() o: Organisation, @Ctx() ctx: GqlContext): Promise<OrgToken[]> {
    const list = await ctx.services.organisations.listTokens(await ctx.principal(), o.name);
    return list.map((t) => ({ prefix: t.prefix, createdAt: t.createdAt }));
  }

  @FieldResolver(() => [Dataset])
  async datasets(@Root() o: Organisation, @Ctx() ctx: GqlContext): Promise<Dataset[]> {
    const list = await ctx.services.datasets.list(await ctx.principal(), o.name);
    return list.map((v) => toDataset(ctx.baseUrl, v));
  }

  @FieldResolver(() => Dataset)
  async dataset(
    @Root() o: Organisation,
    @Arg('name', () => String) name: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const v = await ctx.services.datasets.get(await ctx.principal(), o.name, name);
    return toDataset(ctx.baseUrl, v);
  }

  @FieldResolver(() => Usage, { description: 'Defaults to the current month.' })
  async usage(
    @Root() o: Organisation,
    @Arg('year', () => Int, { nullable: true }) year: number | undefined,
    @Arg('month', () => Int, { nullable: true }) month: number | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<Usage> {
    const r = await ctx.services.usage.report(await ctx.principal(), o.name, {
      year: year ?? undefined,
      month: month ?? undefined,
    });
    return {
      credits: { ...r.credits, limitType: r.credits.limitType as LimitType },
      images: { ...r.images, limitType: r.images.limitType as LimitType },
      datasets: r.datasets.map((d) => ({
        name: d.name,
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
