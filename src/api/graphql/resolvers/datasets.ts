import { Arg, Ctx, FieldResolver, Float, ID, Int, Mutation, Resolver, Root } from 'type-graphql';
import type { GqlContext } from '../context';
import { toDataset } from '../map';
import {
  ContentEntry,
  ContentPage,
  Dataset,
  DatasetEmbedder,
  ProcessingErrorPage,
  StoredContentItem,
  WriteResult,
} from '../types/dataset';
import {
  ContentItemInput,
  ContentUpdateInput,
  EnabledFieldInput,
  ScopedTokenInput,
} from '../types/inputs';
import { contentBody } from '../content-body';
import { parseContentBatch } from '../../../domain/content';

@Resolver(() => Dataset)
export class DatasetResolver {
  @FieldResolver(() => DatasetEmbedder, {
    description:
      "The embedder the dataset's vectors are made with, and how many processed items still wait for a vector from it after an embedder change.",
  })
  async embedder(@Root() d: Dataset, @Ctx() ctx: GqlContext): Promise<DatasetEmbedder> {
    const e = await ctx.services.datasets.embedderStatus(await ctx.principal(), d.org, d.name);
    return Object.assign(new DatasetEmbedder(), e);
  }

  @FieldResolver(() => String, {
    description:
      'The key scoped tokens are signed with (contract §16); it changes when the browse token is rotated.',
  })
  async scopedKey(@Root() d: Dataset, @Ctx() ctx: GqlContext): Promise<string> {
    return ctx.services.datasets.scopedKey(await ctx.principal(), d.org, d.name);
  }

  @Mutation(() => String, {
    description: 'A scoped token signed by the service (contract §16). Organisation token.',
  })
  async createScopedToken(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('scope', () => ScopedTokenInput) scope: ScopedTokenInput,
    @Ctx() ctx: GqlContext,
  ): Promise<string> {
    // GraphQL nulls are absent keys in a payload
    const payload = Object.fromEntries(Object.entries(scope).filter(([, v]) => v != null));
    return ctx.services.datasets.mintScopedToken(
      await ctx.principal(),
      organisation,
      dataset,
      payload,
    );
  }

  @Mutation(() => Dataset, { description: 'Organisation token.' })
  async createDataset(
    @Arg('organisation', () => String) organisation: string,
    @Arg('name', () => String) name: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const v = await ctx.services.datasets.create(await ctx.principal(), organisation, { name });
    return toDataset(ctx.baseUrl, v);
  }

  @Mutation(() => Boolean, { description: 'Permanent; usage keeps the dataset as deleted.' })
  async deleteDataset(
    @Arg('organisation', () => String) organisation: string,
    @Arg('name', () => String) name: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.datasets.delete(await ctx.principal(), organisation, name);
    return true;
  }

  @Mutation(() => Dataset, { description: 'A new browse token; the old one stops working.' })
  async rotateBrowseToken(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const p = await ctx.principal();
    const v = await ctx.services.datasets.rotateBrowseToken(p, organisation, dataset);
    return toDataset(ctx.baseUrl, v);
  }

  @Mutation(() => Dataset, {
    description: 'Array fields (and their values) enabled for querying; replaces the whole set.',
  })
  async setEnabledFields(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('fields', () => [EnabledFieldInput]) fields: EnabledFieldInput[],
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const input = Object.fromEntries(fields.map((f) => [f.name, [...f.values]]));
    const p = await ctx.principal();
    const v = await ctx.services.datasets.setEnabledFields(p, organisation, dataset, input);
    return toDataset(ctx.baseUrl, v);
  }

  @Mutation(() => Dataset, {
    description:
      'Tune similarity to a metadata field of labels (contract §20; REST PUT settings/similarity). learnFrom null switches tuning off.',
  })
  async setSimilarity(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('learnFrom', () => String, {
      nullable: true,
      description: 'null switches tuning off; left out, the current field is kept',
    })
    learnFrom: string | null | undefined,
    @Arg('weight', () => Float, { nullable: true, description: '0–1, default 0.75' })
    weight: number | null,
    @Ctx() ctx: GqlContext,
  ): Promise<Dataset> {
    const p = await ctx.principal();
    const v = await ctx.services.datasets.setSimilarity(p, organisation, dataset, {
      learnFrom,
      weight,
    });
    return toDataset(ctx.baseUrl, v);
  }

  @Mutation(() => WriteResult, {
    description:
      'Add or replace items (REST POST content). All-or-nothing: every bad item is reported.',
  })
  async addContent(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('items', () => [ContentItemInput]) items: ContentItemInput[],
    @Ctx() ctx: GqlContext,
  ): Promise<WriteResult> {
    const writes = parseContentBatch({ content: contentBody(items, { dropNulls: false }) }, 'post');
    return ctx.services.content.write(await ctx.principal(), organisation, dataset, writes, 'post');
  }

  @Mutation(() => WriteResult, {
    description: 'Partial updates of existing items (REST PUT content).',
  })
  async updateContent(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('items', () => [ContentUpdateInput]) items: ContentUpdateInput[],
    @Ctx() ctx: GqlContext,
  ): Promise<WriteResult> {
    // An omitted field and an explicit null both mean "keep" for url; only metadata keys use null.
    const writes = parseContentBatch({ content: contentBody(items, { dropNulls: true }) }, 'put');
    return ctx.services.content.write(await ctx.principal(), organisation, dataset, writes, 'put');
  }

  @Mutation(() => Boolean, { description: 'Unknown ids are ignored.' })
  async deleteContent(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('ids', () => [ID]) ids: string[],
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.content.delete(await ctx.principal(), organisation, dataset, ids);
    return true;
  }

  @FieldResolver(() => ContentPage, { description: 'Every item, processed or not, in id order.' })
  async content(
    @Root() d: Dataset,
    @Arg('offset', () => Int, { defaultValue: 0 }) offset: number,
    @Arg('limit', () => Int, { defaultValue: 100 }) limit: number,
    @Ctx() ctx: GqlContext,
  ): Promise<ContentPage> {
    const rows = await ctx.services.content.list(await ctx.principal(), d.org, d.name, {
      offset,
      limit,
    });
    return {
      totalResults: d.counts.items,
      offset,
      limit,
      entries: rows.map((r) =>
        Object.assign(new ContentEntry(), r, { org: d.org, dataset: d.name }),
      ),
    };
  }

  @FieldResolver(() => StoredContentItem, { nullable: true, description: 'One item by id.' })
  async item(
    @Root() d: Dataset,
    @Arg('id', () => ID) id: string,
    @Ctx() ctx: GqlContext,
  ): Promise<StoredContentItem | null> {
    const it = await ctx.itemLoader(d.org, d.name).load(id);
    return it ? StoredContentItem.from(it) : null;
  }

  @FieldResolver(() => ProcessingErrorPage)
  async processingErrors(
    @Root() d: Dataset,
    @Arg('offset', () => Int, { defaultValue: 0 }) offset: number,
    @Arg('limit', () => Int, { defaultValue: 100 }) limit: number,
    @Ctx() ctx: GqlContext,
  ): Promise<ProcessingErrorPage> {
    const r = await ctx.services.content.errors(await ctx.principal(), d.org, d.name, {
      offset,
      limit,
    });
    return {
      totalResults: r.total,
      entries: r.errors,
    };
  }
}

@Resolver(() => ContentEntry)
export class ContentEntryFields {
  @FieldResolver(() => StoredContentItem, {
    nullable: true,
    description: 'The whole stored item (looked up in one batch for the page).',
  })
  async item(@Root() e: ContentEntry, @Ctx() ctx: GqlContext): Promise<StoredContentItem | null> {
    const it = await ctx.itemLoader(e.org, e.dataset).load(e.id);
    return it ? StoredContentItem.from(it) : null;
  }
}
