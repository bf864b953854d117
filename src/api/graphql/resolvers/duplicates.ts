import { Arg, Ctx, Float, Int, Mutation, Resolver, Root, FieldResolver } from 'type-graphql';
import type { GqlContext } from '../context';
import { Dataset } from '../types/dataset';
import { DuplicateKind, DuplicateReport } from '../types/duplicates';

/** The dataset's near-duplicate report and its dismissals (contract §18). */
@Resolver(() => Dataset)
export class DuplicateResolver {
  @FieldResolver(() => DuplicateReport, {
    description:
      'Groups of items showing the same picture (`exact`) or near copies of one photo (`near`), kept current in the background (contract §18). Free.',
  })
  async duplicates(
    @Root() d: Dataset,
    @Ctx() ctx: GqlContext,
    @Arg('kind', () => DuplicateKind, { nullable: true, description: 'Default: both.' })
    kind?: DuplicateKind,
    @Arg('maxDistance', () => Float, {
      nullable: true,
      description: '0 < d ≤ 0.2; default: the embedder’s.',
    })
    maxDistance?: number,
    @Arg('excludeSameParent', { defaultValue: false }) excludeSameParent?: boolean,
    @Arg('limit', () => Int, { defaultValue: 20, description: '1–100 groups.' }) limit?: number,
    @Arg('cursor', () => String, { nullable: true }) cursor?: string,
  ): Promise<DuplicateReport> {
    const r = await ctx.services.duplicates.report(await ctx.principal(), d.org, d.name, {
      ...(kind ? { kind } : {}),
      ...(maxDistance != null ? { maxDistance } : {}),
      excludeSameParent: excludeSameParent ?? false,
      ...(limit != null ? { limit } : {}),
      ...(cursor != null ? { cursor } : {}),
    });
    return {
      computedAt: r.computedAt === undefined ? null : new Date(r.computedAt).toISOString(),
      pending: r.pending,
      groups: r.groups.map((g) => ({ ...g, kind: g.kind as DuplicateKind })),
      nextCursor: r.nextCursor ?? null,
    };
  }

  @Mutation(() => Boolean, {
    description:
      'Records that these items are not duplicates of each other; later reports keep them apart (organisation token).',
  })
  async dismissDuplicates(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('ids', () => [String]) ids: string[],
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.duplicates.dismiss(await ctx.principal(), organisation, dataset, ids);
    return true;
  }
}
