import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { InMemoryLRUCache } from '@apollo/utils.keyvaluecache';
import { fastifyApolloHandler } from '@as-integrations/fastify';
import { ApolloArmor } from '@escape.tech/graphql-armor';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import type { Logger } from 'pino';
import { AppError } from '../../domain/errors';
import { buildContext, type GqlContext } from './context';
import { formatError } from './errors';
import { PAGE_CSP, graphiqlHtml, loadWebAssets } from './graphiql-page';
import { CONTENT_TYPES } from '../web-assets';
import { graphqlSchema } from './schema';
import { serveSubscriptions } from './subscriptions';
import type { GraphqlServices } from './services';
import { LIMITS } from '../../domain/limits';
import { checkAccept } from '../http/negotiation';

const wantsHtml = (req: FastifyRequest): boolean =>
  req.method === 'GET' && /\btext\/html\b/.test(req.headers.accept ?? '');

const VENDOR_V2 = /^application\/vnd\.[a-z0-9.-]+\.v2\+json$/i;

/**
 * Contract §1 on /graphql: once checkAccept has let the header through, a vendor v2 media type
 * is read as `application/json`, the type Apollo answers in (it negotiates only that and
 * `application/graphql-response+json`, and would answer a bare vendor type with 406).
 */
function graphqlAccept(header: string): string {
  return header
    .split(',')
    .map((part) => {
      const [type, ...params] = part.split(';');
      return VENDOR_V2.test(type.trim()) ? ['application/json', ...params].join(';') : part;
    })
    .join(',');
}

/**
 * Automatic persisted queries (contract §19) are kept in memory, least recently used first out:
 * 8 Mi characters hold thousands of operations of a few KB (one is at most graphqlMaxTokens
 * tokens), while clients registering new hashes cannot grow the process past it.
 */
const APQ_CACHE_CHARS = 8 * 2 ** 20;

/**
 * POST /graphql runs operations (GET too, for queries, behind Apollo's CSRF prevention);
 * GET /graphql from a browser serves the bundled GraphiQL page and /graphql/assets/* its files.
 */
/**
 * Operation names come from clients: the first 100 distinct ones of up to 64 characters are
 * labels, any other is `other`, so a client cannot grow the metrics without bound.
 */
const seenOperations = new Set<string>();
function operationLabel(name: string): string {
  if (name.length > 64) return 'other';
  if (seenOperations.has(name)) return name;
  if (seenOperations.size >= 100) return 'other';
  seenOperations.add(name);
  return name;
}

export interface GraphqlOptions {
  /** Hides introspection and "did you mean" hints. */
  production: boolean;
  /** Logs errors met outside a request. */
  log: Logger;
  /** PUBLIC_BASE_URL: the scheme, host and port of the links answers carry. */
  publicBaseUrl?: string;
  /** Counts a failed authentication of a WebSocket upgrade's client address. */
  authFailedOnUpgrade?: (req: IncomingMessage) => Promise<void>;
}

/** POST/GET /graphql and the GraphiQL page, over the services GraphQL declares. */
export const graphqlApi =
  (services: GraphqlServices, opts: GraphqlOptions): FastifyPluginAsync =>
  async (app) => {
    const { production } = opts;
    // Apollo's formatError has no context: each error is tied to its request as it is met, so
    // it is answered and logged with that request's id.
    const requestOf = new WeakMap<object, GqlContext>();
    const armor = new ApolloArmor({
      maxDepth: { n: LIMITS.graphqlMaxDepth, ignoreIntrospection: true },
      maxAliases: { n: LIMITS.graphqlMaxAliases },
      costLimit: { maxCost: LIMITS.graphqlMaxCost, ignoreIntrospection: true },
      // The token limit is enforced by graphql-js's parser (parseOptions below): armor's plugin
      // throws from a hook, which Apollo reports as a 500.
      maxTokens: { enabled: false },
      maxDirectives: { n: LIMITS.graphqlMaxDirectives },
      // Its mask misses graphql-js's enum-value and inline-fragment hints and leaves a stray "?";
      // formatError removes every "Did you mean …?" in production instead.
      blockFieldSuggestion: { enabled: false },
    });
    const protection = armor.protect();
    const schema = await graphqlSchema();
    const apollo = new ApolloServer<GqlContext>({
      schema,
      introspection: !production,
      csrfPrevention: true,
      // main.ts owns SIGTERM (finish in-flight work, exit 0); Apollo's handler would re-raise the
      // signal and kill the process mid-drain.
      stopOnTerminationSignals: false,
      includeStacktraceInErrorResponses: false,
      allowBatchedHttpRequests: false,
      // Registered only once parsed and validated, so a persisted query meets the same limits
      // (parseOptions, validationRules) as one sent in full, on every use.
      persistedQueries: { cache: new InMemoryLRUCache<string>({ maxSize: APQ_CACHE_CHARS }) },
      parseOptions: { maxTokens: LIMITS.graphqlMaxTokens },
      validationRules: protection.validationRules,
      plugins: [
        ...protection.plugins,
        ApolloServerPluginLandingPageDisabled(),
        // A subgraph would otherwise return a timed trace of every resolver (ftv1) to any client
        // that asks with a header: the router sends nothing to a usage service here.
        ApolloServerPluginInlineTraceDisabled(),
        {
          async requestDidStart() {
            const end = services.metrics.graphqlDuration.startTimer();
            let operation = 'anonymous';
            return {
              async didResolveOperation({ operationName }) {
                if (operationName) operation = operationLabel(operationName);
              },
              // Apollo calls this before it formats the same error objects.
              async didEncounterErrors({ errors, contextValue }) {
                for (const e of errors) requestOf.set(e, contextValue);
              },
              async willSendResponse() {
                end({ operation });
              },
            };
          },
        },
      ],
      // An error met outside a request's pipeline (e.g. a malformed HTTP request) has no context.
      formatError: (formatted, error) => {
        const ctx = requestOf.get(error as object);
        return formatError(formatted, error, ctx?.requestId, ctx?.log ?? opts.log, {
          hideSuggestions: production,
        });
      },
    });
    await apollo.start();
    serveSubscriptions(app, {
      schema,
      validationRules: protection.validationRules,
      services,
      production,
      log: opts.log,
      publicBaseUrl: opts.publicBaseUrl,
      authFailed: opts.authFailedOnUpgrade,
    });
    // Fastify drains HTTP connections on close; Apollo's drain plugin would call app.close() again
    // from inside this hook and wait for itself.
    app.addHook('onClose', async () => {
      await apollo.stop();
    });

    const assets = loadWebAssets();
    const run = fastifyApolloHandler(apollo, {
      context: async (req) => buildContext(services, req, opts.publicBaseUrl),
    });
    const page = (reply: FastifyReply) =>
      reply
        .header('Content-Security-Policy', PAGE_CSP)
        .header('Cache-Control', 'no-cache')
        .type('text/html; charset=utf-8')
        .send(graphiqlHtml(assets));

    app.route({
      method: ['GET', 'POST'],
      url: '/graphql',
      // variables carry metadata, whose keys are the client's (content-body.ts copies them as such)
      config: { graphql: true, dataKeys: true },
      handler: function (req, reply) {
        if (wantsHtml(req)) return page(reply);
        checkAccept(req.headers.accept);
        if (req.headers.accept) req.headers.accept = graphqlAccept(req.headers.accept);
        return run.call(this, req as never, reply as never);
      },
    });

    app.get<{ Params: { file: string } }>(
      '/graphql/assets/:file',
      { config: { public: true } },
      async (req, reply) => {
        const body = assets.files.get(req.params.file);
        if (!body) throw new AppError('not_found', `no asset '${req.params.file}'`);
        return reply
          .type(CONTENT_TYPES[path.extname(req.params.file)] ?? 'application/octet-stream')
          .header('Cache-Control', 'public, max-age=3600')
          .send(body);
      },
    );
  };
