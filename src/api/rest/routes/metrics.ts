import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';

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
    app.get('/metrics', { config: { public: true } }, async (req, reply) => {
      c.auth.requireOperator(await c.auth.authenticate(req.headers.authorization));
      reply.header('content-type', c.metrics.registry.contentType);
      return c.metrics.registry.metrics();
    });
  };
