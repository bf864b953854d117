import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { processingErrorBody } from '../account-bodies';
import { serve } from '../operation';
import * as op from '../schema/content-ops';

export const contentRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    for (const [write, mode] of [
      [op.addContent, 'post'],
      [op.updateContent, 'put'],
    ] as const) {
      serve(app, write, async ({ params, body }, req) => {
        await c.contentService.write(
          req.ctx.principal,
          params.organisation,
          params.dataset,
          body,
          mode,
        );
        return { status: 'accepted' };
      });
    }
    serve(app, op.deleteContent, async ({ params, body }, req) => {
      await c.contentService.delete(req.ctx.principal, params.organisation, params.dataset, body);
      return { status: 'accepted' };
    });
    serve(app, op.listContent, async ({ params, query }, req) => ({
      status: 'ok',
      content: await c.contentService.list(
        req.ctx.principal,
        params.organisation,
        params.dataset,
        query,
      ),
    }));
    serve(app, op.processingErrors, async ({ params, query }, req) => {
      const r = await c.contentService.errors(
        req.ctx.principal,
        params.organisation,
        params.dataset,
        query,
      );
      return { status: 'ok', errors: r.errors.map(processingErrorBody), total_results: r.total };
    });
  };
