import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { param, str } from '../params';
import { reportBody } from '../report-body';
import { datasetBody } from '../account-bodies';
import { datasetLinks } from '../../../services/datasets';

const DS = '/orgs/:organisation/datasets/:dataset';

export const datasetRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.post('/orgs/:organisation/datasets', async (req, reply) => {
      const v = await c.datasets.create(req.ctx, param(req, 'organisation'), req.body);
      return reply.status(201).send({
        status: 'ok',
        dataset_url: datasetLinks(req.ctx.baseUrl, v.org, v.name).dataset,
        dataset: datasetBody(req.ctx.baseUrl, v),
      });
    });
    app.get('/orgs/:organisation/datasets', async (req) => ({
      status: 'ok',
      datasets: (await c.datasets.list(req.ctx, param(req, 'organisation'))).map((v) =>
        datasetBody(req.ctx.baseUrl, v),
      ),
    }));
    app.get(DS, async (req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.get(req.ctx, param(req, 'organisation'), param(req, 'dataset')),
      ),
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
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.rotateBrowseToken(
          req.ctx,
          param(req, 'organisation'),
          param(req, 'dataset'),
        ),
      ),
    }));
    app.put(`${DS}/settings/fields`, async (req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.setEnabledFields(
          req.ctx,
          param(req, 'organisation'),
          param(req, 'dataset'),
          req.body,
        ),
      ),
    }));
  };
