import type { FastifyPluginAsync } from 'fastify';
import { invalid } from '../../../domain/errors';
import type { SearchRequest } from '../../../services/vision';
import type { CollectionRequest, SimilarityResult } from '../../../services/similarity';
import { parseFieldSelection } from '../../fields';
import { figuresBody } from '../figures';
import { parseFiguresParams } from '../figures-params';
import { journeyParam } from '../journey-param';
import { serve } from '../operation';
import { groupedEntry, resultEntry } from '../result-entry';
import * as op from '../schema/vision-ops';
import type { RestServices } from '../services';

type Params = Record<string, string>;

/** A comma-separated id list; blanks are dropped. */
const idList = (ids: string | undefined): string[] => (ids ?? '').split(',');

/** group and group_size as the services take them. */
const grouping = (q: { group?: string; group_size?: number }) => ({
  group:
    q.group === undefined && q.group_size === undefined
      ? undefined
      : { field: q.group, size: q.group_size },
});

/** The contract §15 controls as the services take them. */
const discovery = (q: {
  diversity?: number;
  candidates?: number;
  min_score?: number;
  page?: number;
  exhaustive?: boolean;
}) => ({
  diversity: q.diversity,
  candidates: q.candidates,
  minScore: q.min_score,
  page: q.page,
  exhaustive: q.exhaustive,
});

function strategy(s: string | undefined): CollectionRequest['strategy'] {
  if (s === undefined || s === '' || s === 'centroid' || s === 'best_score') return s || undefined;
  throw invalid("strategy must be 'centroid' or 'best_score'", [
    { param: 'strategy', message: "expected 'centroid' or 'best_score'" },
  ]);
}

function facetScope(s: string | undefined): SearchRequest['facetScope'] {
  if (s === undefined || s === 'groups' || s === 'items') return s;
  throw invalid("facet_scope must be 'groups' or 'items'", [
    { param: 'facet_scope', message: "expected 'groups' or 'items'" },
  ]);
}

function sortOrder(order: string | undefined): SearchRequest['order'] {
  if (order === undefined || order === 'asc' || order === 'desc') return order;
  throw invalid("order must be 'asc' or 'desc'", [
    { param: 'order', message: "expected 'asc' or 'desc'" },
  ]);
}

/** Result entries with scores; explore_url carries fields, q, limit (and the journey). */
function shape(
  baseUrl: string,
  params: Params,
  q: { fields?: string; q?: string; limit?: number; group?: string; group_size?: number },
  r: SimilarityResult,
) {
  const sel = parseFieldSelection(q.fields);
  const link = {
    baseUrl,
    org: params.organisation,
    dataset: params.dataset,
    carry: {
      fields: q.fields,
      q: q.q,
      limit: q.limit,
      path: r.path,
      group: q.group,
      groupSize: q.group_size,
    },
  };
  const entry = (h: SimilarityResult['hits'][number]) => resultEntry(h.item, sel, link, h.score);
  return {
    status: 'ok',
    results: r.hits.map((h) =>
      h.group
        ? groupedEntry(entry(h), h.group, h.group.more.map(entry), r.groupSize ?? 1)
        : entry(h),
    ),
    ...(r.total !== undefined ? { total_results: r.total } : {}),
  };
}

export const visionRoutes =
  (s: Pick<RestServices, 'vision' | 'similarity' | 'track'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.details, async ({ params, query }, req) => {
      const { organisation: org, dataset } = params;
      const sel = parseFieldSelection(query.fields);
      const items = await s.vision.details(req.ctx.principal, org, dataset, idList(query.ids));
      const link = { baseUrl: req.ctx.baseUrl, org, dataset, carry: { fields: query.fields } };
      return { status: 'ok', results: items.map((it) => resultEntry(it, sel, link)) };
    });
    serve(app, op.fieldCounts, async ({ params, query }, req) => {
      const { organisation: org, dataset } = params;
      const sel = parseFieldSelection(query.fields);
      return {
        status: 'ok',
        fields: sel.all
          ? await s.vision.fieldNames(req.ctx.principal, org, dataset)
          : await s.vision.fieldCounts(req.ctx.principal, org, dataset, {
              fields: sel.names,
              q: query.q,
            }),
      };
    });
    serve(app, op.similar, async ({ params, query }, req) => {
      const r = await s.similarity.similar(req.ctx.principal, params.organisation, params.dataset, {
        id: query.id,
        q: query.q,
        limit: query.limit,
        v: query.v,
        ...grouping(query),
        ...discovery(query),
        excludeParent: query.exclude_parent,
      });
      return shape(req.ctx.baseUrl, params, query, r);
    });
    serve(app, op.explore, async ({ params, query }, req) => {
      const r = await s.similarity.explore(req.ctx.principal, params.organisation, params.dataset, {
        id: query.id,
        q: query.q,
        limit: query.limit,
        v: query.v,
        ...grouping(query),
        ...discovery(query),
        path: journeyParam(query.path),
      });
      return shape(req.ctx.baseUrl, params, query, r);
    });
    serve(app, op.lens, async ({ params, query, body }, req) => {
      const r = await s.similarity.lens(req.ctx.principal, params.organisation, params.dataset, {
        q: query.q,
        limit: query.limit,
        v: query.v,
        ...grouping(query),
        ...discovery(query),
        image: body.image,
      });
      return shape(req.ctx.baseUrl, params, query, r);
    });
    serve(app, op.track, async ({ params, query, body }, req) => {
      await s.track.track(req.ctx.principal, params.organisation, params.dataset, {
        v: query.v,
        events: body?.events ?? [],
      });
      return { status: 'accepted' };
    });
    serve(app, op.collection, async ({ params, query }, req) => {
      const r = await s.similarity.collection(
        req.ctx.principal,
        params.organisation,
        params.dataset,
        {
          q: query.q,
          limit: query.limit,
          v: query.v,
          ...grouping(query),
          ...discovery(query),
          ids: idList(query.ids),
          negativeIds: query.negative_ids === undefined ? [] : idList(query.negative_ids),
          strategy: strategy(query.strategy),
        },
      );
      return shape(req.ctx.baseUrl, params, query, r);
    });
    serve(app, op.search, async ({ params, query }, req) => {
      const figures = parseFiguresParams(query);
      const order = sortOrder(query.order);
      const page = await s.vision.search(req.ctx.principal, params.organisation, params.dataset, {
        q: query.q,
        sort: query.sort,
        order,
        page: query.page,
        limit: query.limit,
        v: query.v,
        figures,
        ...grouping(query),
        facetScope: facetScope(query.facet_scope),
      });
      const link = {
        baseUrl: req.ctx.baseUrl,
        org: params.organisation,
        dataset: params.dataset,
        carry: {
          fields: query.fields,
          q: query.q,
          limit: query.limit,
          group: query.group,
          groupSize: query.group_size,
        },
      };
      const sel = parseFieldSelection(query.fields);
      return {
        status: 'ok',
        results: page.groups
          ? page.groups.map((g) =>
              groupedEntry(
                resultEntry(g.items[0]!, sel, link),
                g,
                g.items.slice(1).map((it) => resultEntry(it, sel, link)),
                query.group_size ?? 1,
              ),
            )
          : page.items.map((it) => resultEntry(it, sel, link)),
        total_results: page.total,
        ...(page.totalGroups !== undefined
          ? { total_groups: page.totalGroups, total_groups_exact: page.totalGroupsExact }
          : {}),
        ...figuresBody(page.figures),
      };
    });
  };
