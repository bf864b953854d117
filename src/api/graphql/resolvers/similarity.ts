import { Arg, Args, Ctx, FieldResolver, ID, Resolver, Root } from 'type-graphql';
import type { SimilarityResult } from '../../../services/similarity';
import type { GqlContext } from '../context';
import { carried, scored, similarity, similarityPage } from '../similarity-map';
import {
  CollectionStrategy,
  PagedSimilarityArgs,
  SimilarityArgs,
  SimilarityPage,
} from '../types/similarity';
import { Vision, VisionItem } from '../types/vision';

const EXCLUDE_PARENT = {
  defaultValue: false,
  description: "Drop items sharing the item's parent metadata value.",
};
const NEGATIVE_IDS = {
  defaultValue: [],
  description: 'Items to steer away from: 0 to 50 ids (contract §15).',
};
const STRATEGY = { defaultValue: CollectionStrategy.CENTROID };

/**
 * The Vision API's similarity requests (contract §7, §11, §15): each as a list of items, and the
 * paged ones also as a SimilarityPage that says where it stands (totalResults, hasNextPage).
 */
@Resolver(() => Vision)
export class SimilarityResolver {
  private runSimilar(
    vis: Vision,
    id: string,
    a: PagedSimilarityArgs,
    excludeParent: boolean,
    ctx: GqlContext,
  ): Promise<SimilarityResult> {
    return ctx.principal().then((who) =>
      ctx.services.similarity.similar(who, vis.org, vis.dataset, {
        ...similarity(a),
        id,
        excludeParent,
      }),
    );
  }

  private runCollection(
    vis: Vision,
    ids: string[],
    negativeIds: string[],
    strategy: CollectionStrategy,
    a: PagedSimilarityArgs,
    ctx: GqlContext,
  ): Promise<SimilarityResult> {
    return ctx.principal().then((who) =>
      ctx.services.similarity.collection(who, vis.org, vis.dataset, {
        ...similarity(a),
        ids,
        negativeIds: negativeIds ?? [],
        strategy,
      }),
    );
  }

  private runLens(
    vis: Vision,
    image: string,
    a: PagedSimilarityArgs,
    ctx: GqlContext,
  ): Promise<SimilarityResult> {
    return ctx
      .principal()
      .then((who) =>
        ctx.services.similarity.lens(who, vis.org, vis.dataset, { ...similarity(a), image }),
      );
  }

  @FieldResolver(() => [VisionItem], {
    description:
      'Billable (SIMILAR). The item itself first (score 1, page 1 only), then the most similar items matching q.',
  })
  async similar(
    @Root() vis: Vision,
    @Arg('id', () => ID) id: string,
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Arg('excludeParent', () => Boolean, EXCLUDE_PARENT) excludeParent: boolean,
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const r = await this.runSimilar(vis, id, a, excludeParent, ctx);
    return scored(ctx.baseUrl, vis, r, carried(a));
  }

  @FieldResolver(() => SimilarityPage, {
    description: 'Billable (SIMILAR). Vision.similar as a page: totalResults with exhaustive.',
  })
  async similarPage(
    @Root() vis: Vision,
    @Arg('id', () => ID) id: string,
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Arg('excludeParent', () => Boolean, EXCLUDE_PARENT) excludeParent: boolean,
    @Ctx() ctx: GqlContext,
  ): Promise<SimilarityPage> {
    const r = await this.runSimilar(vis, id, a, excludeParent, ctx);
    return similarityPage(r, scored(ctx.baseUrl, vis, r, carried(a)), 1);
  }

  @FieldResolver(() => [VisionItem], {
    description:
      'Billable (COLLECTION). Items in the style of a group of 1 to 50 ids, steered away from negativeIds; inputs excluded.',
  })
  async collection(
    @Root() vis: Vision,
    @Arg('ids', () => [ID]) ids: string[],
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Arg('negativeIds', () => [ID], NEGATIVE_IDS) negativeIds: string[],
    @Arg('strategy', () => CollectionStrategy, STRATEGY) strategy: CollectionStrategy,
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const r = await this.runCollection(vis, ids, negativeIds, strategy, a, ctx);
    return scored(ctx.baseUrl, vis, r, carried(a));
  }

  @FieldResolver(() => SimilarityPage, {
    description:
      'Billable (COLLECTION). Vision.collection as a page: totalResults with exhaustive.',
  })
  async collectionPage(
    @Root() vis: Vision,
    @Arg('ids', () => [ID]) ids: string[],
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Arg('negativeIds', () => [ID], NEGATIVE_IDS) negativeIds: string[],
    @Arg('strategy', () => CollectionStrategy, STRATEGY) strategy: CollectionStrategy,
    @Ctx() ctx: GqlContext,
  ): Promise<SimilarityPage> {
    const r = await this.runCollection(vis, ids, negativeIds, strategy, a, ctx);
    return similarityPage(r, scored(ctx.baseUrl, vis, r, carried(a)));
  }

  @FieldResolver(() => [VisionItem], {
    description:
      'Billable (EXPLORE). Without id a random selection; with id the next step of a journey (path: the earlier selections, oldest first), diversified.',
  })
  async explore(
    @Root() vis: Vision,
    @Arg('id', () => ID, { nullable: true }) id: string | undefined,
    @Arg('path', () => [ID], { defaultValue: [] }) path: string[],
    @Args(() => SimilarityArgs) a: SimilarityArgs,
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const r = await ctx.services.similarity.explore(await ctx.principal(), vis.org, vis.dataset, {
      ...similarity(a),
      id: id ?? undefined,
      path: path ?? [],
    });
    return scored(ctx.baseUrl, vis, r, { ...carried(a), path: r.path });
  }

  @FieldResolver(() => [VisionItem], {
    description:
      'Billable (LENS). Items similar to an image given as a data URI (jpeg or png, ≤ 500 KB).',
  })
  async lens(
    @Root() vis: Vision,
    @Arg('image', () => String) image: string,
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const r = await this.runLens(vis, image, a, ctx);
    return scored(ctx.baseUrl, vis, r, carried(a));
  }

  @FieldResolver(() => SimilarityPage, {
    description: 'Billable (LENS). Vision.lens as a page: totalResults with exhaustive.',
  })
  async lensPage(
    @Root() vis: Vision,
    @Arg('image', () => String) image: string,
    @Args(() => PagedSimilarityArgs) a: PagedSimilarityArgs,
    @Ctx() ctx: GqlContext,
  ): Promise<SimilarityPage> {
    const r = await this.runLens(vis, image, a, ctx);
    return similarityPage(r, scored(ctx.baseUrl, vis, r, carried(a)));
  }
}
