import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthService } from '../../services/auth';
import { invalid, isAppError } from '../../domain/errors';
import type { Principal } from '../../services/principal';
import { checkAccept } from './negotiation';
import { principalKey, type AuthFailureLimit } from './rate-limit';

/** Who is calling, and the base of the absolute URLs the answer carries. */
interface RequestContext {
  principal: Principal;
  /** Scheme, host and port used in absolute URLs (PUBLIC_BASE_URL or the request's own). */
  baseUrl: string;
  requestId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    ctx: RequestContext;
    /**
     * /graphql: the outcome of the Authorization header, checked here for the rate-limit key
     * and reused by the operation, which reports a failure itself (introspection needs no token).
     */
    graphqlAuth?: Promise<Principal>;
  }
}

const unauthorized = (e: unknown): boolean => isAppError(e) && e.code === 'unauthorized';

/** The onRequest hook: request id, Accept, and who is calling (contract §1–§3). */
export function authenticateRequests(
  auth: Pick<AuthService, 'authenticate'>,
  publicBaseUrl: string | undefined,
  authFailed: AuthFailureLimit,
) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    reply.header('X-Request-Id', req.id);
    // Node's own answer to this is a bare 400 (the server turns that check off for us).
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined)
      throw invalid('missing Host header (HTTP/1.1 requires one)');
    const { config } = req.routeOptions;
    if (config.public) return;
    const header = req.headers.authorization;
    if (config.graphql) {
      if (header === undefined) return;
      req.graphqlAuth = auth.authenticate(header);
      try {
        req.rateKey = principalKey(await req.graphqlAuth);
      } catch (e) {
        if (unauthorized(e)) await authFailed(req);
      }
      return;
    }
    checkAccept(req.headers.accept);
    let principal: Principal;
    try {
      principal = await auth.authenticate(header);
    } catch (e) {
      if (unauthorized(e)) await authFailed(req);
      throw e;
    }
    req.rateKey = principalKey(principal);
    req.ctx = {
      principal,
      baseUrl: publicBaseUrl ?? `${req.protocol}://${req.host}`,
      requestId: req.id,
    };
  };
}
