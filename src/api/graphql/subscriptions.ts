import http, { type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import {
  GraphQLError,
  getOperationAST,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { AppError, isAppError } from '../../domain/errors';
import { LIMITS } from '../../domain/limits';
import type { Principal } from '../../services/principal';
import { writeRawError } from '../http/client-errors';
import { requestIdFrom } from '../http/request-id';
import { contextOf } from './context';
import { formatError } from './errors';
import type { GraphqlServices } from './services';

const PROTOCOL = 'graphql-transport-ws';
const MAX_PAYLOAD_BYTES = 64 * 1024;
const MAX_OPERATIONS = 10;
/**
 * A revoked token loses its open subscriptions within the 2-s window of contract §12: a check
 * each second, on token reads that are themselves at most a second old.
 */
const RECHECK_MS = 1000;
/** How long clients get to answer the closing handshake before their sockets are cut. */
const CLOSE_GRACE_MS = 1000;
/** RFC 6455 "going away": the server is shutting down; a client reconnects elsewhere. */
const GOING_AWAY = 1001;

export interface SubscriptionOptions {
  /** The schema POST /graphql executes, and the same validation rules (armor's limits). */
  schema: GraphQLSchema;
  validationRules: readonly ValidationRule[];
  services: GraphqlServices;
  production: boolean;
  log: Logger;
  publicBaseUrl?: string;
  /** Counts a failed authentication of the upgrade's client address. */
  authFailed?: (req: IncomingMessage) => Promise<void>;
}

/** What a connection authenticated with, checked again every RECHECK_MS. */
interface Connection {
  principal: Principal;
  requestId: string;
  log: FastifyBaseLogger;
}

/** connection_init's payload: `{ "authorization": "token …" }`. */
type InitPayload = Record<string, unknown>;

/**
 * GraphQL subscriptions over the graphql-transport-ws protocol on /graphql (contract §17). The
 * upgrade bypasses Fastify's hooks and Apollo's plugins, so this applies their rules itself:
 * the token from connection_init, the failed-authentication limit, the parser's token limit,
 * the armor validation rules, the error table, and the 2-s revocation window.
 */
export function serveSubscriptions(app: FastifyInstance, opts: SubscriptionOptions): void {
  const { schema, services } = opts;
  const rules = [...specifiedRules, ...opts.validationRules];
  const connections = new WeakMap<WebSocket, Connection>();
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_PAYLOAD_BYTES,
    handleProtocols: (offered) => (offered.has(PROTOCOL) ? PROTOCOL : false),
  });
  let closing = false;

  const connectionOf = (socket: WebSocket): Connection => {
    const c = connections.get(socket);
    // onConnect acknowledged it, or graphql-ws would not pass a subscribe on
    if (!c) throw new Error('subscription on an unauthenticated connection');
    return c;
  };
  const formatted = (c: Connection | undefined, errors: readonly GraphQLError[]) =>
    errors.map((e): GraphQLFormattedError =>
      formatError(e.toJSON(), e, c?.requestId, c?.log ?? opts.log, {
        hideSuggestions: opts.production,
      }),
    );

  useServer<InitPayload>(
    {
      schema,
      connectionInitWaitTimeout: 10_000,
      onConnect: async (ctx) => {
        // GraphiQL sends its Headers tab as the payload: `Authorization` as often as not
        const params = ctx.connectionParams ?? {};
        const key = Object.keys(params).find((k) => k.toLowerCase() === 'authorization');
        const header = key === undefined ? undefined : params[key];
        const authorization = typeof header === 'string' ? header : undefined;
        const { socket, request } = ctx.extra;
        let principal: Principal;
        try {
          principal = await services.auth.authenticate(authorization);
        } catch (e) {
          // an outage is not the client's fault: graphql-ws closes with 4500 instead
          if (!isAppError(e) || e.code !== 'unauthorized') throw e;
          await opts.authFailed?.(request).catch(() => undefined);
          return false;
        }
        const requestId = requestIdFrom(request.headers['x-request-id']);
        const log = opts.log.child({ reqId: requestId }) as unknown as FastifyBaseLogger;
        connections.set(socket, { principal, requestId, log });
        watchRevocation(socket, authorization!);
        return true;
      },
      onSubscribe: (ctx, _id, payload) => {
        const conn = connectionOf(ctx.extra.socket);
        // this operation is counted already
        if (Object.keys(ctx.subscriptions).length > MAX_OPERATIONS)
          return [new GraphQLError(`at most ${MAX_OPERATIONS} subscriptions per connection`)];
        let document: DocumentNode;
        try {
          document = parse(payload.query, { maxTokens: LIMITS.graphqlMaxTokens });
        } catch (e) {
          return [e instanceof GraphQLError ? e : new GraphQLError(String(e))];
        }
        const errors = validate(schema, document, rules);
        if (errors.length > 0) return errors;
        const op = getOperationAST(document, payload.operationName);
        if (!op) return [new GraphQLError('unable to identify the operation')];
        if (op.operation !== 'subscription')
          return [
            new GraphQLError(
              `only subscriptions are served over WebSocket; send a ${op.operation} with POST /graphql`,
            ),
          ];
        return {
          schema,
          document,
          operationName: payload.operationName,
          variableValues: payload.variables,
          contextValue: contextOf(services, {
            requestId: conn.requestId,
            baseUrl: opts.publicBaseUrl ?? baseUrlOf(ctx.extra.request),
            log: conn.log,
            principal: async () => conn.principal,
          }),
        };
      },
      onError: (ctx, _id, _payload, errors) => formatted(connections.get(ctx.extra.socket), errors),
      onNext: (ctx, _id, _payload, _args, result) =>
        result.errors
          ? { ...result, errors: formatted(connections.get(ctx.extra.socket), result.errors) }
          : undefined,
    },
    wss,
  );

  /** Closes the socket with 4403 once its token no longer authenticates. */
  function watchRevocation(socket: WebSocket, authorization: string): void {
    const timer = setInterval(() => {
      services.auth.authenticate(authorization).then(
        () => undefined,
        (e: unknown) => {
          // an outage proves nothing about the token: check again next time
          if (isAppError(e) && e.code === 'unauthorized')
            socket.close(CloseCode.Forbidden, 'Forbidden');
        },
      );
    }, RECHECK_MS);
    timer.unref();
    socket.once('close', () => clearInterval(timer));
  }

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const id = requestIdFrom(req.headers['x-request-id']);
    if (String(req.headers.upgrade).toLowerCase() !== 'websocket')
      return answerAsRequest(app.server, req, socket, id);
    const path = (req.url ?? '').split('?')[0]!.replace(/(.)\/+$/, '$1');
    if (path !== '/graphql')
      return writeRawError(
        socket,
        404,
        new AppError(
          'not_found',
          `no WebSocket endpoint at ${path}; subscriptions are at /graphql`,
        ),
        id,
      );
    const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(',');
    if (!offered.some((p) => p.trim() === PROTOCOL))
      return writeRawError(
        socket,
        400,
        new AppError(
          'invalid_request',
          `a WebSocket on /graphql must offer the ${PROTOCOL} protocol`,
        ),
        id,
      );
    if (closing)
      return writeRawError(socket, 503, new AppError('unavailable', 'the server is stopping'), id);
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });

  // Before the HTTP server's close cuts every socket: clients are told to go elsewhere.
  app.addHook('preClose', async () => {
    closing = true;
    const open = [...wss.clients];
    for (const ws of open) ws.close(GOING_AWAY, 'server shutting down');
    await Promise.race([
      Promise.all(
        open.map((ws) =>
          ws.readyState === ws.CLOSED ? undefined : new Promise((r) => ws.once('close', r)),
        ),
      ),
      new Promise((r) => setTimeout(r, CLOSE_GRACE_MS).unref()),
    ]);
    for (const ws of wss.clients) ws.terminate();
    await new Promise((r) => wss.close(r));
  });
}

/**
 * Node hands every request with `Connection: Upgrade` to the upgrade listeners once there is
 * one, `curl --http2`'s `Upgrade: h2c` too: such a request without a body is answered as the
 * HTTP/1.1 request it also is. Node has ended the request stream of an upgrade by then, so one
 * with a body is refused, naming the header to drop.
 */
function answerAsRequest(
  server: http.Server,
  req: IncomingMessage,
  socket: Duplex,
  id: string,
): void {
  const length = Number(req.headers['content-length'] ?? 0);
  if (req.headers['transfer-encoding'] || length > 0)
    return writeRawError(
      socket,
      400,
      new AppError(
        'invalid_request',
        `a request with a body cannot ask to upgrade to ${String(req.headers.upgrade)}; send it without the Upgrade header`,
      ),
      id,
    );
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.on('finish', () => {
    res.detachSocket(socket as Socket);
    socket.end();
  });
  server.emit('request', req, res);
}

function baseUrlOf(req: IncomingMessage): string {
  const secure = (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${secure ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}`;
}
