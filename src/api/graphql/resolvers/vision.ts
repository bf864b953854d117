import {
  Arg,
  Args,
  ArgsType,
  Ctx,
  Field,
  FieldResolver,
  Float,
  ID,
  Int,
  Query,
  Resolver,
  Root,
} from 'type-graphql';
import { invalid } from '../../../domain/errors';
import { parseFieldSelection, projectMetadata } from '../../fields';
import type { GqlContext } from '../context';
import { figuresSpec, figuresOut } from '../figures-map';
import { toVisionItem } from '../map';
import { FacetInput, FilterInput, HistogramInput } from '../types/figures';
import { SortOrder } from '../types/enums';
import { JSONObjectScalar, JSONScalar } from '../types/scalars';
import { Facet, FacetScope, GroupInput, ResultGroup, SearchConnection } from '../types/search';
import { SimilarityArgs } from '../types/similarity';
import { Vision, VisionItem } from '../types/vision';
import { withGroup, type Grouped } from '../similarity-map';
import { SimilarityResolver } from './similarity';

@ArgsType()
class SearchArgs {
  @Field(() => String, { nullable: true, description: 'The q filter of contract §5.' })
  q?: string;

  @Field(() => FilterInput, {
    nullable: true,
    description: 'A typed filter, ANDed with q; no q string to build.',
  })
  filter?: FilterInput;

  @Field(() => String, {
    nullable: true,
    description: 'A metadata field or service_created_at/service_updated_at (the default).',
  })
  sort?: string;

  @Field(() => SortOrder, { defaultValue: SortOrder.DESC })
  order!: SortOrder;

  @Field(() => Int, { defaultValue: 1 })
  page!: number;

  @Field(() => Int, { defaultValue: 10, description: '2 to 50.' })
  limit!: number;

  @Field(() => String, { nullable: true, description: 'Action variables, key:value pairs.' })
  v?: string;

  @Field(() => [FacetInput], {
    nullable: true,
    description: 'Value counts over every match (contract §10); with figures, limit may be 0.',
  })
  facets?: FacetInput[];

  @Field(() => Int, { nullable: true, description: 'Values listed per facet: 1 to 1000 (10).' })
  facetSize?: number;

  @Field(() => [String], { nullable: true, description: 'count/min/max/avg/sum per field.' })
  stats?: string[];

  @Field(() => [HistogramInput], { nullable: true })
  histograms?: HistogramInput[];

  @Field(() => GroupInput, {
    nullable: true,
    description: 'One result per group: pages, totalGroups and facets count groups.',
  })
  group?: GroupInput;

  @Field(() => FacetScope, {
    nullable: true,
    description: 'Under group: GROUPS (default) or ITEMS.',
  })
  facetScope?: FacetScope;
}

@Resolver(() => Vision)
export class VisionResolver {
  @Query(() => Vision, {
    description: "A dataset through the Vision API; needs the dataset's token (its browse token).",
  })
  vision(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
  ): Vision {
    return Object.assign(new Vision(), { org: organisation, dataset });
  }

  @FieldResolver(() => SearchConnection, { description: 'Billable (request type SEARCH).' })
  async search(
    @Root() vis: Vision,
    @Args(() => SearchArgs) a: SearchArgs,
    @Ctx() ctx: GqlContext,
  ): Promise<SearchConnection> {
    const r = await ctx.services.vision.search(await ctx.principal(), vis.org, vis.dataset, {
      q: a.q ?? undefined,
      sort: a.sort ?? undefined,
      order: a.order,
      page: a.page,
      limit: a.limit,
      v: a.v ?? undefined,
      figures: figuresSpec(a),
      ...(a.filter ? { filter: a.filter } : {}),
      ...(a.group ? { group: { field: a.group.field, size: a.group.size } } : {}),
      ...(a.facetScope ? { facetScope: a.facetScope } : {}),
    });
    const link = {
      baseUrl: ctx.baseUrl,
      org: vis.org,
      dataset: vis.dataset,
      carry: {
        q: a.q ?? undefined,
        limit: a.limit,
        ...(a.group ? { group: a.group.field, groupSize: a.group.size } : {}),
      },
    };
    const size = a.group?.size ?? 1;
    const pages = r.totalGroups ?? r.total;
    return {
      totalResults: r.total,
      ...(r.totalGroups !== undefined
        ? { totalGroups: r.totalGroups, totalGroupsExact: r.totalGroupsExact }
        : {}),
      page: r.page,
      limit: r.limit,
      hasNextPage: r.page * r.limit < pages,
      results: r.groups
        ? r.groups.map((g) =>
            withGroup(
              toVisionItem(g.items[0]!, link),
              g,
              g.items.slice(1).map((i) => toVisionItem(i, link)),
              size,
            ),
          )
        : r.items.map((i) => toVisionItem(i, link)),
      ...figuresOut(r.figures),
    };
  }

  @FieldResolver(() => [VisionItem], {
    description:
      'Processed items among ids, in the order asked; unknown ids are absent. Not billable.',
  })
  async details(
    @Root() vis: Vision,
    @Arg('ids', () => [ID]) ids: string[],
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const items = await ctx.services.vision.details(
      await ctx.principal(),
      vis.org,
      vis.dataset,
      ids,
    );
    const link = { baseUrl: ctx.baseUrl, org: vis.org, dataset: vis.dataset, carry: {} };
    return items.map((i) => toVisionItem(i, link));
  }

  @FieldResolver(() => [String], { description: 'Metadata field names, generated ones included.' })
  async fieldNames(@Root() vis: Vision, @Ctx() ctx: GqlContext): Promise<string[]> {
    return ctx.services.vision.fieldNames(await ctx.principal(), vis.org, vis.dataset);
  }

  @FieldResolver(() => [Facet], {
    description: 'Value counts among items matching q. Not billable.',
  })
  async facets(
    @Root() vis: Vision,
    @Arg('fields', () => [String]) fields: string[],
    @Arg('q', () => String, { nullable: true }) q: string | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<Facet[]> {
    const names = fields.map((f) => f.trim());
    const bad = names.findIndex((f) => f === '' || f === '*' || f.includes(','));
    if (bad >= 0)
      throw invalid('fields must name metadata fields (use fieldNames for the list of names)', [
        { param: 'fields', index: bad, message: `'${names[bad]}' is not a field name` },
      ]);
    const r = await ctx.services.vision.fieldCounts(await ctx.principal(), vis.org, vis.dataset, {
      fields: names,
      q: q ?? undefined,
    });
    return Object.entries(r).map(([field, counts]) => ({
      field,
      values: Object.entries(counts as Record<string, number>)
        .map(([value, count]) => ({ value, count }))
        .sort((x, y) => y.count - x.count || (x.value < y.value ? -1 : 1)),
    }));
  }
}

const valueOf = (i: VisionItem, field: string): unknown =>
  Object.hasOwn(i.item.metadata, field) ? i.item.metadata[field] : undefined;

@Resolver(() => VisionItem)
export class VisionItemFields {
  @FieldResolver(() => JSONObjectScalar, {
    description:
      'Public metadata: the named fields (generated ones such as image_width included), or all of them and the generated fields when fields is omitted.',
  })
  metadata(
    @Root() i: VisionItem,
    @Arg('fields', () => [String], { nullable: true }) fields: string[] | undefined,
  ): Record<string, unknown> {
    return projectMetadata(i.item, fields ? parseFieldSelection(fields) : { all: true });
  }

  @FieldResolver(() => ResultGroup, {
    nullable: true,
    description: 'With group (contract §13): the group this result stands for.',
  })
  group(@Root() i: Grouped): ResultGroup | null {
    return i.groupView ?? null;
  }

  @FieldResolver(() => JSONScalar, { nullable: true, description: 'One metadata value, any type.' })
  value(@Root() i: VisionItem, @Arg('field', () => String) field: string): unknown {
    return valueOf(i, field) ?? null;
  }

  @FieldResolver(() => String, { nullable: true, description: 'The value if it is a string.' })
  string(@Root() i: VisionItem, @Arg('field', () => String) field: string): string | null {
    const v = valueOf(i, field);
    return typeof v === 'string' ? v : null;
  }

  @FieldResolver(() => Float, { nullable: true, description: 'The value if it is a number.' })
  number(@Root() i: VisionItem, @Arg('field', () => String) field: string): number | null {
    const v = valueOf(i, field);
    return typeof v === 'number' ? v : null;
  }

  @FieldResolver(() => Boolean, { nullable: true, description: 'The value if it is a boolean.' })
  boolean(@Root() i: VisionItem, @Arg('field', () => String) field: string): boolean | null {
    const v = valueOf(i, field);
    return typeof v === 'boolean' ? v : null;
  }

  @FieldResolver(() => [VisionItem], {
    description:
      "Billable (SIMILAR), as Vision.similar: this item first (score 1), then the limit − 1 most similar items matching q. Lets another subgraph's entity reference ask for it (contract §19).",
  })
  async similar(
    @Root() i: VisionItem,
    @Args(() => SimilarityArgs) a: SimilarityArgs,
    @Ctx() ctx: GqlContext,
  ): Promise<VisionItem[]> {
    const vis = Object.assign(new Vision(), { org: i.organisation, dataset: i.dataset });
    return new SimilarityResolver().similar(vis, i.id, a, false, ctx);
  }

  @FieldResolver(() => [String], {
    nullable: true,
    description: 'The value as a list of strings if it is an array (numbers as strings).',
  })
  strings(@Root() i: VisionItem, @Arg('field', () => String) field: string): string[] | null {
    const v = valueOf(i, field);
    return Array.isArray(v) ? v.map(String) : null;
  }
}
