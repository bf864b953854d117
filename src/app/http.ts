import type http from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type FastifyHttpOptions,
} from 'fastify';
import type { Logger } from 'pino';
import { consolePages } from '../api/console/plugin';
import { graphqlApi } from '../api/graphql/server';
import { authenticateRequests } from '../api/http/authenticate';
import { registerBodyParsers } from '../api/http/body-parsers';
import { answerClientError, answerUnrouted } from '../api/http/client-errors';
import { sendError } from '../api/http/errors';
import { registerRateLimits, type AuthFailureLimit } from '../api/http/rate-limit';
import { requestIdFrom } from '../api/http/request-id';
import { opsRoutes, restApi } from '../api/rest/plugin';
import { recordRequestMetrics } from '../api/rest/routes/metrics';
import type { Config } from '../config/env';
import { AppError, isAppError } from '../domain/errors';
import { LIMITS } from '../domain/limits';
import type { Services } from './container';

declare module 'fastify' {
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
 * Lets a close finish once the requests being answered are answered. Node's server.close(),
 * which Fastify's close awaits, waits for every connection to end but closes only those its
 * parser counts as idle when the close begins. Two kinds outlive that: a connection accepted
 * whose request has not arrived (a browser's preconnect, a pool's spare socket) counts as busy
 * from the accept, and close() also stops the headers timeout that would have ended it, so it
 * holds the close for as long as the client keeps it; and a request being answered gets its
 * answer keep-alive, after which the socket waits out keepAliveTimeout (72 s). Either holds
 * the service's stop() that long (test/e2e/stop-with-open-connections.test.ts). So once closing,
 * a connection with nothing being answered is closed at once, and the others as soon as their
 * answer is sent, which says so.
 */
function closeConnectionsOnClose(app: FastifyInstance): void {
  /** Every open connection, with the answers in progress on it (several when pipelined). */
  const connections = new Map<Socket, Set<http.ServerResponse>>();
  let closing = false;
  app.server.on('connection', (socket: Socket) => {
    if (closing) return void socket.destroy();
    connections.set(socket, new Set());
    socket.once('close', () => connections.delete(socket));
  });
  // An upgraded socket (a subscription) belongs to the WebSocket server, which closes it itself.
  app.server.on('upgrade', (req: http.IncomingMessage) => connections.delete(req.socket as Socket));
  app.server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const answers = connections.get(req.socket as Socket);
    if (!answers) return;
    answers.add(res);
    if (closing && !res.headersSent) res.setHeader('Connection', 'close');
    res.once('close', () => {
      answers.delete(res);
      if (closing && answers.size === 0) req.socket.destroySoon();
    });
  });
  app.addHook('preClose', async () => {
    closing = true;
    for (const [socket, answers] of connections) {
      if (answers.size === 0) socket.destroy();
      for (const res of answers) if (!res.headersSent) res.setHeader('Connection', 'close');
    }
  });
}

/** A Fastify server whose every answer, error or not, follows contract §1–§2. */
function baseServer(
  log: Logger,
  opts: Omit<FastifyHttpOptions<http.Server>, 'loggerInstance' | 'genReqId'>,
  notFound: (req: FastifyRequest) => AppError,
  /** What an error is answered as (by default itself). */
  answerFor: (err: unknown, req: FastifyRequest) => Promise<unknown> = async (err) => err,
): FastifyInstance {
  const app = Fastify({
    ...opts,
    loggerInstance: log as FastifyBaseLogger,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
  });
  app.setErrorHandler(async (err, req, reply) => sendError(req, reply, await answerFor(err, req)));
  app.setNotFoundHandler((req, reply) => sendError(req, reply, notFound(req)));
  closeConnectionsOnClose(app);
  return app;
}

/**
 * The API's HTTP server: contract §1–§2 for every route (request ids, Accept, bodies, errors,
 * authentication, rate limits), then REST, GraphQL and the console as sibling plugins, each
 * given the services it declares.
 */
export async function buildApiServer(
  services: Services,
  config: Config,
  log: Logger,
): Promise<FastifyInstance> {
  let authFailed: AuthFailureLimit = async () => undefined;
  const app = baseServer(
    log,
    {
      bodyLimit: LIMITS.requestBodyBytes,
      // Per-request access logs only at debug: at info a busy API would log every request twice.
      logController: new LogController({
        disableRequestLogging: config.LOG_LEVEL !== 'debug' && config.LOG_LEVEL !== 'trace',
      }),
      routerOptions: { ignoreTrailingSlash: true },
      // Everything refused before a route runs answers with the contract's error body too.
      clientErrorHandler: answerClientError,
      frameworkErrors: (err, req, reply) => void sendError(req, reply, err),
      http: { requireHostHeader: false },
    },
    (req) => new AppError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`),
    // A scoped token's signature is checked with the dataset the route names, after the hook:
    // its refusals count toward the address's failed authentications all the same.
    async (err, req) => {
      if (!isAppError(err) || err.code !== 'unauthorized' || req.ctx?.principal.kind !== 'scoped')
        return err;
      return authFailed(req).then(
        () => err,
        (limited: unknown) => limited,
      );
    },
  );
  answerUnrouted(app.server);
  const routeTable: FastifyInstance['routeTable'] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat())
      if (method !== 'HEAD') routeTable.push({ method, url: r.url });
  });
  registerBodyParsers(app);
  authFailed = await registerRateLimits(app, config.RATE_LIMIT_PER_MINUTE);
  app.addHook('onRequest', authenticateRequests(services.auth, config.PUBLIC_BASE_URL, authFailed));
  recordRequestMetrics(app, services.metrics);

  await app.register(restApi(services, authFailed));
  await app.register(
    graphqlApi(services, {
      production: config.NODE_ENV === 'production',
      log,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      // the limit's key is the client address, all an upgrade request has of a Fastify request
      authFailedOnUpgrade: (req) =>
        authFailed({ ip: req.socket.remoteAddress, routeOptions: { config: {} } } as never),
    }),
  );
  await app.register(consolePages());
  return app;
}

/**
 * What a worker-only process serves on PORT: health (for an orchestrator's probes) and its
 * metrics, nothing of the API, which it does not run.
 */
export async function buildOpsServer(
  services: Services,
  config: Config,
  log: Logger,
): Promise<FastifyInstance> {
  const app = baseServer(
    log,
    { logController: new LogController({ disableRequestLogging: true }) },
    (req) =>
      new AppError(
        'not_found',
        `a worker serves only /healthz, /readyz and /metrics, not ${req.url}`,
      ),
  );
  const authFailed = await registerRateLimits(app, config.RATE_LIMIT_PER_MINUTE);
  recordRequestMetrics(app, services.metrics);
  await app.register(opsRoutes(services, authFailed));
  return app;
}
