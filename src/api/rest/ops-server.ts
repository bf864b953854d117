import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Container } from '../../app/container';
import { AppError } from '../../domain/errors';
import { sendError } from './errors';
import { registerRateLimits } from './rate-limit';
import { requestIdFrom } from './request-id';
import { healthRoutes } from './routes/health';
import { metricsRoute, recordRequestMetrics } from './routes/metrics';

/**
 * What a worker-only process serves on PORT: health (for an orchestrator's probes) and its
 * metrics, nothing of the API, which it does not run.
 */
export async function buildOpsServer(c: Container): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: c.log as FastifyBaseLogger,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.setErrorHandler((err, req, reply) => sendError(req, reply, err));
  app.setNotFoundHandler((req, reply) =>
    sendError(
      req,
      reply,
      new AppError(
        'not_found',
        `a worker serves only /healthz, /readyz and /metrics, not ${req.url}`,
      ),
    ),
  );
  const authFailed = await registerRateLimits(app, c.config.RATE_LIMIT_PER_MINUTE);
  recordRequestMetrics(app, c);
  await app.register(healthRoutes(c));
  await app.register(metricsRoute(c, authFailed));
  return app;
}
