import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { serve } from '../operation';
import * as op from '../schema/service-ops';

export const healthRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.healthz, async () => ({ status: 'ok' }));
    serve(app, op.readyz, async (_input, _req, reply) => {
      const checks = await Promise.allSettled([
        c.accounts.ping(),
        c.content.ping(),
        c.queue.ping(),
      ]);
      const [accounts, store, queue] = checks.map((r) =>
        r.status === 'fulfilled' ? 'ok' : 'unavailable',
      );
      const ready = checks.every((r) => r.status === 'fulfilled');
      if (!ready) reply.status(503).header('Retry-After', '5');
      return { status: ready ? 'ok' : 'unavailable', checks: { accounts, store, queue } };
    });
  };
