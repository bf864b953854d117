import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { param, str } from '../params';
import { reportBody } from '../report-body';

const DS = '/orgs/:organisation/datasets/:dataset';

export const datasetRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.post('/orgs/:organisation/datasets', async (req, reply) => {
      const r = await c.datasets.create(req.ctx, param(req, 'organisation'), req.body);
      return reply.status(201).send({ status: 'ok', ...r });
    });
    app.get('/orgs/:organisation/datasets', async (req) => ({
      status: 'ok',
      datasets: await c.datasets.list(req.ctx, param(req, 'organisation')),
    }));
    app.get(DS, async (req) => ({
      status: 'ok',
      dataset: await c.datasets.get(req.ctx, param(req, 'organisation'), param(req, 'dataset')),
    }));
    app.get(`${DS}/analytics`, async (req) => {
      const report = await c.report.report(
        req.ctx,
        param(req, 'organisation'),
        param(req, 'dataset'),
        {
          from: str(req, 'from'),
          to: str(req, 'to'),
          interval: str(req, 'interval'),
          top: str(req, 'top'),
        },
      );
      return { status: 'ok', analytics: reportBody(report) };
    });
    app.delete(DS, async (req) => {
      await c.datasets.delete(req.ctx, param(req, 'organisation'), param(req, 'dataset'));
      return { status: 'ok' };
    });
    app.post(`${DS}/browse_token`, async (req) => ({
      status: 'ok',
      dataset: await c.datasets.rotateBrowseToken(
        req.ctx,
        param(req, 'organisation'),
        param(req, 'dataset'),
      ),
    }));
    app.put(`${DS}/settings/fields`, async (req) => ({
      status: 'ok',
      dataset: await c.datasets.setEnabledFields(
        req.ctx,
        param(req, 'organisation'),
        param(req, 'dataset'),
        req.body,
      ),
    }));
  };
