import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { datasetLinks } from '../../../services/datasets';
import { datasetBody } from '../account-bodies';
import { serve } from '../operation';
import { reportBody } from '../report-body';
import * as op from '../schema/account-ops';

export const datasetRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.createDataset, async ({ params, body }, req) => {
      const v = await c.datasets.create(req.ctx, params.organisation, body);
      return {
        status: 'ok',
        dataset_url: datasetLinks(req.ctx.baseUrl, v.org, v.name).dataset,
        dataset: datasetBody(req.ctx.baseUrl, v),
      };
    });
    serve(app, op.listDatasets, async ({ params }, req) => ({
      status: 'ok',
      datasets: (await c.datasets.list(req.ctx, params.organisation)).map((v) =>
        datasetBody(req.ctx.baseUrl, v),
      ),
    }));
    serve(app, op.getDataset, async ({ params }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.get(req.ctx, params.organisation, params.dataset),
      ),
    }));
    serve(app, op.analytics, async ({ params, query }, req) => ({
      status: 'ok',
      analytics: reportBody(
        await c.report.report(req.ctx, params.organisation, params.dataset, query),
      ),
    }));
    serve(app, op.deleteDataset, async ({ params }, req) => {
      await c.datasets.delete(req.ctx, params.organisation, params.dataset);
      return { status: 'ok' };
    });
    serve(app, op.rotateBrowseToken, async ({ params }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.rotateBrowseToken(req.ctx, params.organisation, params.dataset),
      ),
    }));
    serve(app, op.setEnabledFields, async ({ params, body }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await c.datasets.setEnabledFields(req.ctx, params.organisation, params.dataset, body),
      ),
    }));
  };
