import type { FastifyPluginAsync } from 'fastify';
import { processingErrorBody } from '../account-bodies';
import { deleteIds } from '../delete-ids';
import { serve } from '../operation';
import * as op from '../schema/content-ops';
import type { RestServices } from '../services';

export const contentRoutes =
  (s: Pick<RestServices, 'content'>): FastifyPluginAsync =>
  async (app) => {
    for (const [write, mode] of [
      [op.addContent, 'post'],
      [op.updateContent, 'put'],
    ] as const) {
      serve(app, write, async ({ params, body }, req) => {
        await s.content.write(req.ctx.principal, params.organisation, params.dataset, body, mode);
        return { status: 'accepted' };
      });
    }
    serve(app, op.deleteContent, async ({ params, body }, req) => {
      const ids = deleteIds(body);
      await s.content.delete(req.ctx.principal, params.organisation, params.dataset, ids);
      return { status: 'accepted' };
    });
    serve(app, op.listContent, async ({ params, query }, req) => ({
      status: 'ok',
      content: await s.content.list(req.ctx.principal, params.organisation, params.dataset, query),
    }));
    serve(app, op.processingErrors, async ({ params, query }, req) => {
      const r = await s.content.errors(
        req.ctx.principal,
        params.organisation,
        params.dataset,
        query,
      );
      return { status: 'ok', errors: r.errors.map(processingErrorBody), total_results: r.total };
    });
  };
