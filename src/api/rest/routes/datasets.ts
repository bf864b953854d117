import type { FastifyPluginAsync } from 'fastify';
import { datasetBody } from '../account-bodies';
import { datasetLinks } from '../../links';
import { serve } from '../operation';
import { reportBody } from '../report-body';
import * as op from '../schema/account-ops';
import type { RestServices } from '../services';

export const datasetRoutes =
  (s: Pick<RestServices, 'datasets' | 'report'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.createDataset, async ({ params, body }, req) => {
      const v = await s.datasets.create(req.ctx.principal, params.organisation, body);
      return {
        status: 'ok',
        dataset_url: datasetLinks(req.ctx.baseUrl, v.org, v.name).dataset,
        dataset: datasetBody(req.ctx.baseUrl, v),
      };
    });
    serve(app, op.listDatasets, async ({ params }, req) => ({
      status: 'ok',
      datasets: (await s.datasets.list(req.ctx.principal, params.organisation)).map((v) =>
        datasetBody(req.ctx.baseUrl, v),
      ),
    }));
    serve(app, op.getDataset, async ({ params }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await s.datasets.get(req.ctx.principal, params.organisation, params.dataset),
      ),
    }));
    serve(app, op.analytics, async ({ params, query }, req) => ({
      status: 'ok',
      analytics: reportBody(
        await s.report.report(req.ctx.principal, params.organisation, params.dataset, {
          ...query,
          // a non-number is NaN, which the report's rule refuses by name
          top: query.top === undefined || query.top === '' ? undefined : Number(query.top),
        }),
      ),
    }));
    serve(app, op.deleteDataset, async ({ params }, req) => {
      await s.datasets.delete(req.ctx.principal, params.organisation, params.dataset);
      return { status: 'ok' };
    });
    serve(app, op.rotateBrowseToken, async ({ params }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await s.datasets.rotateBrowseToken(req.ctx.principal, params.organisation, params.dataset),
      ),
    }));
    serve(app, op.getScopedKey, async ({ params }, req) => ({
      status: 'ok',
      key: await s.datasets.scopedKey(req.ctx.principal, params.organisation, params.dataset),
    }));
    serve(app, op.createScopedToken, async ({ params, body }, req) => ({
      status: 'ok',
      token: await s.datasets.mintScopedToken(
        req.ctx.principal,
        params.organisation,
        params.dataset,
        body,
      ),
    }));
    serve(app, op.setEnabledFields, async ({ params, body }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await s.datasets.setEnabledFields(
          req.ctx.principal,
          params.organisation,
          params.dataset,
          body.fields,
        ),
      ),
    }));
    serve(app, op.setSimilarity, async ({ params, body }, req) => ({
      status: 'ok',
      dataset: datasetBody(
        req.ctx.baseUrl,
        await s.datasets.setSimilarity(req.ctx.principal, params.organisation, params.dataset, {
          learnFrom: body.learn_from,
          weight: body.weight ?? null,
        }),
      ),
    }));
  };
