import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Container } from '../../../app/container';
import { parseFieldSelection } from '../../../services/results';
import { resultEntry } from '../result-entry';
import type { RequestContext } from '../../../services/principal';
import type { SimilarityResult } from '../../../services/similarity';
import { LIMITS } from '../../../domain/limits';
import { figuresBody } from '../figures';
import { bool, int, param, str } from '../params';

const DS = '/orgs/:organisation/datasets/:dataset';

/** Result entries with scores; explore_url carries fields, q, limit (and the journey). */
function shape(
  ctx: RequestContext,
  org: string,
  dataset: string,
  q: { fields?: string; q?: string; limit?: number },
  r: SimilarityResult,
) {
  const sel = parseFieldSelection(q.fields);
  const link = {
    baseUrl: ctx.baseUrl,
    org,
    dataset,
    carry: { fields: q.fields, q: q.q, limit: q.limit, path: r.path },
  };
  return { status: 'ok', results: r.hits.map((h) => resultEntry(h.item, sel, link, h.score)) };
}

/** What every search and similarity request names: the dataset, and what results and their links carry. */
function similarityParams(req: FastifyRequest) {
  return {
    org: param(req, 'organisation'),
    ds: param(req, 'dataset'),
    q: { fields: str(req, 'fields'), q: str(req, 'q'), limit: int(req, 'limit') },
  };
}

export const visionRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.get(`${DS}/content/details`, async (req) => {
      const [org, ds, fields] = [
        param(req, 'organisation'),
        param(req, 'dataset'),
        str(req, 'fields'),
      ];
      const sel = parseFieldSelection(fields);
      const items = await c.vision.details(req.ctx, org, ds, (str(req, 'ids') ?? '').split(','));
      const link = { baseUrl: req.ctx.baseUrl, org, dataset: ds, carry: { fields } };
      return { status: 'ok', results: items.map((it) => resultEntry(it, sel, link)) };
    });
    app.get(`${DS}/content/fields`, async (req) => ({
      status: 'ok',
      fields: await c.vision.fields(req.ctx, param(req, 'organisation'), param(req, 'dataset'), {
        fields: str(req, 'fields'),
        q: str(req, 'q'),
      }),
    }));
    app.get(`${DS}/similar`, async (req) => {
      const { org, ds, q } = similarityParams(req);
      const r = await c.similarity.similar(req.ctx, org, ds, {
        ...q,
        id: str(req, 'id'),
        v: str(req, 'v'),
        excludeParent: bool(req, 'exclude_parent'),
      });
      return shape(req.ctx, org, ds, q, r);
    });
    app.get(`${DS}/explore`, async (req) => {
      const { org, ds, q } = similarityParams(req);
      const r = await c.similarity.explore(req.ctx, org, ds, {
        ...q,
        id: str(req, 'id'),
        v: str(req, 'v'),
        path: str(req, 'path'),
      });
      return shape(req.ctx, org, ds, q, r);
    });
    app.post(`${DS}/search`, { bodyLimit: LIMITS.lensBodyBytes }, async (req) => {
      const { org, ds, q } = similarityParams(req);
      const r = await c.similarity.lens(req.ctx, org, ds, req.body, { ...q, v: str(req, 'v') });
      return shape(req.ctx, org, ds, q, r);
    });
    app.post(`${DS}/track`, async (req, reply) => {
      await c.track.track(
        req.ctx,
        param(req, 'organisation'),
        param(req, 'dataset'),
        str(req, 'v'),
        req.body,
      );
      return reply.code(202).send({ status: 'accepted' });
    });
    app.get(`${DS}/collection`, async (req) => {
      const { org, ds, q } = similarityParams(req);
      const r = await c.similarity.collection(req.ctx, org, ds, {
        ...q,
        ids: str(req, 'ids'),
        v: str(req, 'v'),
      });
      return shape(req.ctx, org, ds, q, r);
    });
    app.get(`${DS}/search`, async (req) => {
      const { org, ds, q } = similarityParams(req);
      const sel = parseFieldSelection(q.fields);
      const page = await c.vision.search(req.ctx, org, ds, {
        ...q,
        page: int(req, 'page'),
        sort: str(req, 'sort'),
        order: str(req, 'order'),
        v: str(req, 'v'),
        facets: str(req, 'facets'),
        facet_size: str(req, 'facet_size'),
        disjunctive: str(req, 'disjunctive'),
        stats: str(req, 'stats'),
        histogram: str(req, 'histogram'),
      });
      const link = { baseUrl: req.ctx.baseUrl, org, dataset: ds, carry: q };
      return {
        status: 'ok',
        results: page.items.map((it) => resultEntry(it, sel, link)),
        total_results: page.total,
        ...figuresBody(page.figures),
      };
    });
  };
