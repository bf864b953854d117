import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { serve } from '../operation';
import * as op from '../schema/service-ops';

/** Request latency by route template (never the raw path: it holds names and ids). */
export function recordRequestMetrics(app: FastifyInstance, c: Container): void {
  app.addHook('onResponse', async (req, reply) => {
    c.metrics.httpDuration.observe(
      {
        method: req.method,
        route: req.routeOptions.url ?? 'unrouted',
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
  });
}

/**
 * GET /metrics (contract §12): Prometheus text, operator token. Public to the request hook
 * (a worker-only process has no authentication hook), so the token is checked here.
 */
export const metricsRoute =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.metrics, async (_input, req) => {
      c.auth.requireOperator(await c.auth.authenticate(req.headers.authorization));
      return c.metrics.registry.metrics();
    });
  };
