import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';

export const healthRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.get('/healthz', { config: { public: true } }, async () => ({ status: 'ok' }));
    app.get('/readyz', { config: { public: true } }, async (_req, reply) => {
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
