import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../domain/errors';
import type { Principal } from '../../services/principal';

declare module 'fastify' {
  interface FastifyRequest {
    /** Whose allowance this request uses: the authenticated principal, when there is one. */
    rateKey?: string;
  }
}

const WINDOW_MS = 60_000;

/**
 * The caller's identity, never the header's text: `TOKEN x` and `token   x` are one bucket.
 * Dataset tokens go by dataset, as a dataset has one browse token at a time.
 */
export function principalKey(p: Principal): string {
  if (p.kind === 'org') return `org:${p.prefix}`;
  if (p.kind === 'dataset') return `dataset:${p.datasetId}`;
  // per token: it names no dataset before the route runs
  if (p.kind === 'scoped') return `scoped:${p.token.sig.toString('base64url')}`;
  return 'operator';
}

/** Counts one failed authentication of the request's address; throws 429 past the limit. */
export type AuthFailureLimit = (req: FastifyRequest) => Promise<void>;

/**
 * RATE_LIMIT_PER_MINUTE requests per principal (per client address for GraphQL requests without
 * a valid token), and as many failed authentications per client address, so guessing tokens is
 * throttled while valid tokens from that address keep working. 0 turns both off.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  perMinute: number,
): Promise<AuthFailureLimit> {
  if (perMinute <= 0) return async () => undefined;
  await app.register(rateLimit, {
    max: perMinute,
    timeWindow: WINDOW_MS,
    // After onRequest, which authenticates and sets rateKey.
    hook: 'preHandler',
    allowList: (req: FastifyRequest) => !!req.routeOptions.config.public,
    keyGenerator: (req: FastifyRequest) => req.rateKey ?? `ip:${req.ip}`,
    errorResponseBuilder: (_req, ctx) => {
      const wait = Math.ceil(ctx.ttl / 1000);
      return new AppError(
        'rate_limited',
        `more than ${ctx.max} requests per minute for this token; retry in ${wait} s`,
        undefined,
        wait,
      );
    },
  });
  const failures = app.createRateLimit({
    // Not the global allowList: /metrics is public to the hooks but checks a token itself.
    allowList: () => false,
    keyGenerator: (req: FastifyRequest) => `auth-failures:${req.ip}`,
  });
  return async (req) => {
    const r = await failures(req);
    if (!r.isAllowed && r.isExceeded)
      throw new AppError(
        'rate_limited',
        `more than ${r.max} failed authentications per minute from this address; retry in ${r.ttlInSeconds} s`,
        undefined,
        r.ttlInSeconds,
      );
  };
}
