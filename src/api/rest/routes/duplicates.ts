import type { FastifyPluginAsync } from 'fastify';
import { serve } from '../operation';
import * as op from '../schema/duplicate-ops';
import type { RestServices } from '../services';

export const duplicateRoutes =
  (s: Pick<RestServices, 'duplicates'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.duplicates, async ({ params, query }, req) => {
      const r = await s.duplicates.report(req.ctx.principal, params.organisation, params.dataset, {
        ...(query.kind !== undefined ? { kind: query.kind } : {}),
        ...(query.max_distance !== undefined ? { maxDistance: query.max_distance } : {}),
        excludeSameParent: query.exclude_same_parent ?? false,
        ...(query.limit !== undefined ? { limit: query.limit } : {}),
        ...(query.cursor !== undefined ? { cursor: query.cursor } : {}),
      });
      return {
        status: 'ok',
        computed_at: r.computedAt === undefined ? null : new Date(r.computedAt).toISOString(),
        pending: r.pending,
        groups: r.groups,
        next_cursor: r.nextCursor ?? null,
      };
    });
    serve(app, op.dismissDuplicates, async ({ params, body }, req) => {
      await s.duplicates.dismiss(req.ctx.principal, params.organisation, params.dataset, body.ids);
      return { status: 'ok' };
    });
  };
