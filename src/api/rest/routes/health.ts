import type { FastifyPluginAsync } from 'fastify';
import { serve } from '../operation';
import * as op from '../schema/service-ops';
import type { RestServices } from '../services';

export const healthRoutes =
  (s: Pick<RestServices, 'readiness'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.healthz, async () => ({ status: 'ok' }));
    serve(app, op.readyz, async (_input, _req, reply) => {
      const { ready, checks } = await s.readiness.check();
      if (!ready) reply.status(503).header('Retry-After', '5');
      return { status: ready ? 'ok' : 'unavailable', checks };
    });
  };
