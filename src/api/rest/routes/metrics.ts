import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { isAppError } from '../../../domain/errors';
import type { Metrics } from '../../../observability/metrics';
import { serve } from '../operation';
import type { AuthFailureLimit } from '../../http/rate-limit';
import * as op from '../schema/service-ops';
import type { RestServices } from '../services';

/** Request latency by route template (never the raw path: it holds names and ids). */
export function recordRequestMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (req, reply) => {
    metrics.httpDuration.observe(
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
 * (a worker-only process has no authentication hook), so the token is checked here, and a bad
 * one counts as a failed authentication of the address like anywhere else: the operator token
 * must not be guessable here at full speed.
 */
export const metricsRoute =
  (s: Pick<RestServices, 'auth' | 'metrics'>, authFailed: AuthFailureLimit): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.metrics, async (_input, req) => {
      const principal = await s.auth.authenticate(req.headers.authorization).catch(async (e) => {
        if (isAppError(e) && e.code === 'unauthorized') await authFailed(req);
        throw e;
      });
      s.auth.requireOperator(principal);
      return s.metrics.registry.metrics();
    });
  };
