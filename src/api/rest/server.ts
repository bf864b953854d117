import crypto from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
} from 'fastify';
import type { Container } from '../../app/container';
import { AppError } from '../../domain/errors';
import { registerGraphql } from '../graphql/server';
import type { RequestContext } from '../../services/principal';
import { errorBody, sendError } from './errors';
import { checkAccept } from './negotiation';
import { contentRoutes } from './routes/content';
import { datasetRoutes } from './routes/datasets';
import { healthRoutes } from './routes/health';
import { orgRoutes } from './routes/orgs';
import { visionRoutes } from './routes/vision';

declare module 'fastify' {
  interface FastifyRequest {
    ctx: RequestContext;
  }
  interface FastifyContextConfig {
    /** Health checks and the GraphiQL assets need no token. */
    public?: boolean;
    /**
     * /graphql: GraphQL negotiates its own media types and authenticates inside the operation
     * (introspection needs no token), but the per-token rate limit still applies.
     */
    graphql?: boolean;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** Default body limit; content routes raise it to 5 MB. */
const DEFAULT_BODY_LIMIT = 1024 * 1024;

export async function buildRestServer(c: Container): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: c.log as FastifyBaseLogger,
    bodyLimit: DEFAULT_BODY_LIMIT,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    },
    // Per-request access logs only at debug: at info a busy API would log every request twice.
    logController: new LogController({
      disableRequestLogging: c.config.LOG_LEVEL !== 'debug' && c.config.LOG_LEVEL !== 'trace',
    }),
    routerOptions: { ignoreTrailingSlash: true },
  });

  // JSON only: anything else is 415. Vendor JSON media types parse as JSON too.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(
    /^application\/[a-z0-9.+-]*\+json$/i,
    { parseAs: 'string' },
    app.getDefaultJsonParser('error', 'error'),
  );

  app.setErrorHandler((err, req, reply) => sendError(req, reply, err));
  app.setNotFoundHandler((req, reply) =>
    sendError(
      req,
      reply,
      new AppError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`),
    ),
  );

  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
    if (req.routeOptions.config.public || req.routeOptions.config.graphql) return;
    checkAccept(req.headers.accept);
    const principal = await c.auth.authenticate(req.headers.authorization);
    req.ctx = {
      principal,
      baseUrl: c.config.PUBLIC_BASE_URL ?? `${req.protocol}://${req.host}`,
      requestId: req.id,
    };
  });

  if (c.config.RATE_LIMIT_PER_MINUTE > 0) {
    await app.register(rateLimit, {
      max: c.config.RATE_LIMIT_PER_MINUTE,
      timeWindow: 60_000,
      hook: 'preHandler',
      allowList: (req: FastifyRequest) => !!req.routeOptions.config.public,
      keyGenerator: (req: FastifyRequest) =>
        crypto
          .createHash('sha256')
          .update(req.headers.authorization ?? req.ip)
          .digest('hex'),
      errorResponseBuilder: (req, ctx) => {
        const e = new AppError(
          'rate_limited',
          `more than ${ctx.max} requests per minute for this token; retry in ${Math.ceil(ctx.ttl / 1000)} s`,
          undefined,
          Math.ceil(ctx.ttl / 1000),
        );
        return Object.assign(new Error(e.message), { statusCode: 429, body: errorBody(e, req.id) });
      },
    });
  }

  await app.register(healthRoutes(c));
  await app.register(orgRoutes(c));
  await app.register(datasetRoutes(c));
  await app.register(contentRoutes(c));
  await app.register(visionRoutes(c));
  await registerGraphql(app, c);
  return app;
}
