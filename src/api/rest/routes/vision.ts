import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { parseFieldSelection } from '../../../services/results';
import type { RequestContext } from '../../../services/principal';
import type { SimilarityResult } from '../../../services/similarity';
import { figuresBody } from '../figures';
import { serve } from '../operation';
import { resultEntry } from '../result-entry';
import * as op from '../schema/vision-ops';

type Params = Record<string, string>;

/** Result entries with scores; explore_url carries fields, q, limit (and the journey). */
function shape(
  ctx: RequestContext,
  params: Params,
  q: { fields?: string; q?: string; limit?: number },
  r: SimilarityResult,
) {
  const sel = parseFieldSelection(q.fields);
  const link = {
    baseUrl: ctx.baseUrl,
    org: params.organisation,
    dataset: params.dataset,
    carry: { fields: q.fields, q: q.q, limit: q.limit, path: r.path },
  };
  return { status: 'ok', results: r.hits.map((h) => resultEntry(h.item, sel, link, h.score)) };
}

export const visionRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.details, async ({ params, query }, req) => {
      const { organisation: org, dataset } = params;
      const sel = parseFieldSelection(query.fields);
      const items = await c.vision.details(req.ctx, org, dataset, (query.ids ?? '').split(','));
      const link = { baseUrl: req.ctx.baseUrl, org, dataset, carry: { fields: query.fields } };
      return { status: 'ok', results: items.map((it) => resultEntry(it, sel, link)) };
    });
    serve(app, op.fieldCounts, async ({ params, query }, req) => ({
      status: 'ok',
      fields: await c.vision.fields(req.ctx, params.organisation, params.dataset, query),
    }));
    serve(app, op.similar, async ({ params, query }, req) => {
      const r = await c.similarity.similar(req.ctx, params.organisation, params.dataset, {
        ...query,
        excludeParent: query.exclude_parent,
      });
      return shape(req.ctx, params, query, r);
    });
    serve(app, op.explore, async ({ params, query }, req) => {
      const r = await c.similarity.explore(req.ctx, params.organisation, params.dataset, query);
      return shape(req.ctx, params, query, r);
    });
    serve(app, op.lens, async ({ params, query, body }, req) => {
      const r = await c.similarity.lens(req.ctx, params.organisation, params.dataset, body, query);
      return shape(req.ctx, params, query, r);
    });
    serve(app, op.track, async ({ params, query, body }, req) => {
      await c.track.track(req.ctx, params.organisation, params.dataset, query.v, body);
      return { status: 'accepted' };
    });
    serve(app, op.collection, async ({ params, query }, req) => {
      const r = await c.similarity.collection(req.ctx, params.organisation, params.dataset, query);
      return shape(req.ctx, params, query, r);
    });
    serve(app, op.search, async ({ params, query }, req) => {
      const sel = parseFieldSelection(query.fields);
      const page = await c.vision.search(req.ctx, params.organisation, params.dataset, query);
      const carry = { fields: query.fields, q: query.q, limit: query.limit };
      const link = {
        baseUrl: req.ctx.baseUrl,
        org: params.organisation,
        dataset: params.dataset,
        carry,
      };
      return {
        status: 'ok',
        results: page.items.map((it) => resultEntry(it, sel, link)),
        total_results: page.total,
        ...figuresBody(page.figures),
      };
    });
  };
