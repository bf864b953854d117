import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { int, param, str } from '../params';

const DS = '/orgs/:organisation/datasets/:dataset';

export const visionRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.get(`${DS}/content/details`, async (req) => ({
      status: 'ok',
      results: await c.vision.details(req.ctx, param(req, 'organisation'), param(req, 'dataset'), {
        ids: str(req, 'ids'),
        fields: str(req, 'fields'),
      }),
    }));
    app.get(`${DS}/content/fields`, async (req) => ({
      status: 'ok',
      fields: await c.vision.fields(req.ctx, param(req, 'organisation'), param(req, 'dataset'), {
        fields: str(req, 'fields'),
        q: str(req, 'q'),
      }),
    }));
    app.get(`${DS}/search`, async (req) => ({
      status: 'ok',
      ...(await c.vision.search(req.ctx, param(req, 'organisation'), param(req, 'dataset'), {
        page: int(req, 'page'),
        limit: int(req, 'limit'),
        sort: str(req, 'sort'),
        order: str(req, 'order'),
        q: str(req, 'q'),
        fields: str(req, 'fields'),
        v: str(req, 'v'),
      })),
    }));
  };
