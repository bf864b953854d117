import { readFileSync } from 'node:fs';
import path from 'node:path';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Container } from '../../app/container';
import { AppError } from '../../domain/errors';
import { registerGraphql } from '../graphql/server';
import type { RequestContext } from '../../services/principal';
import { authenticateRequests } from './authenticate';
import { registerBodyParsers } from './body-parsers';
import { answerClientError, answerUnrouted } from './client-errors';
import { sendError } from './errors';
import { registerRateLimits } from './rate-limit';
import { requestIdFrom } from './request-id';
import { consoleRoutes } from './routes/console';
import { contentRoutes } from './routes/content';
import { datasetRoutes } from './routes/datasets';
import { healthRoutes } from './routes/health';
import { metricsRoute, recordRequestMetrics } from './routes/metrics';
import { openApiRoute } from './routes/openapi';
import { orgRoutes } from './routes/orgs';
import { visionRoutes } from './routes/vision';
import { LIMITS } from '../../domain/limits';

declare module 'fastify' {
  interface FastifyRequest {
    ctx: RequestContext;
  }
  interface FastifyInstance {
    /** Every route this server answers (GET's automatic HEAD aside), for the /openapi.json check. */
    routeTable: Array<{ method: string; url: string }>;
  }
  interface FastifyContextConfig {
    /** Health checks and the GraphiQL assets need no token. */
    public?: boolean;
    /**
     * /graphql: GraphQL negotiates its own media types and authenticates inside the operation
     * (introspection needs no token), but the per-token rate limit still applies.
     */
    graphql?: boolean;
    /**
     * The body's object keys are the client's data (metadata): a key named `__proto__` is one
     * like any other there, not an attempt at prototype poisoning (body-parsers.ts).
     */
    dataKeys?: boolean;
  }
}

/**
 * The release /openapi.json names: the nearest package.json above this file (src/, dist/ and the
 * benchmarks' bench/dist/src/ sit at different depths below the root).
 */
function releaseVersion(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    try {
      return (
        JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }
      ).version;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || dir === path.dirname(dir)) throw e;
    }
  }
}
const VERSION = releaseVersion();

export async function buildRestServer(c: Container): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: c.log as FastifyBaseLogger,
    bodyLimit: LIMITS.requestBodyBytes,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    // Per-request access logs only at debug: at info a busy API would log every request twice.
    logController: new LogController({
      disableRequestLogging: c.config.LOG_LEVEL !== 'debug' && c.config.LOG_LEVEL !== 'trace',
    }),
    routerOptions: { ignoreTrailingSlash: true },
    // Everything refused before a route runs answers with the contract's error body too.
    clientErrorHandler: answerClientError,
    frameworkErrors: (err, req, reply) => void sendError(req, reply, err),
    http: { requireHostHeader: false },
  });
  answerUnrouted(app.server);
  const routeTable: FastifyInstance['routeTable'] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat())
      if (method !== 'HEAD') routeTable.push({ method, url: r.url });
  });
  registerBodyParsers(app);

  app.setErrorHandler((err, req, reply) => sendError(req, reply, err));
  app.setNotFoundHandler((req, reply) =>
    sendError(
      req,
      reply,
      new AppError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`),
    ),
  );

  const authFailed = await registerRateLimits(app, c.config.RATE_LIMIT_PER_MINUTE);
  app.addHook('onRequest', authenticateRequests(c, authFailed));

  recordRequestMetrics(app, c);
  await app.register(healthRoutes(c));
  await app.register(metricsRoute(c, authFailed));
  await app.register(openApiRoute(VERSION));
  await app.register(orgRoutes(c));
  await app.register(datasetRoutes(c));
  await app.register(contentRoutes(c));
  await app.register(visionRoutes(c));
  await registerGraphql(app, c);
  await app.register(consoleRoutes(c));
  return app;
}
