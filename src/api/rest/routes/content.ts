import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { processingErrorBody } from '../account-bodies';
import { LIMITS } from '../../../domain/limits';
import { int, param } from '../params';

const DS = '/orgs/:organisation/datasets/:dataset';
const big = { bodyLimit: LIMITS.contentBodyBytes };

export const contentRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    for (const [method, mode] of [
      ['post', 'post'],
      ['put', 'put'],
    ] as const) {
      app[method](`${DS}/content`, big, async (req, reply) => {
        await c.contentService.write(
          req.ctx.principal,
          param(req, 'organisation'),
          param(req, 'dataset'),
          req.body,
          mode,
        );
        return reply.status(202).send({ status: 'accepted' });
      });
    }
    app.delete(`${DS}/content`, async (req, reply) => {
      await c.contentService.delete(
        req.ctx.principal,
        param(req, 'organisation'),
        param(req, 'dataset'),
        req.body,
      );
      return reply.status(202).send({ status: 'accepted' });
    });
    app.get(`${DS}/content`, async (req) => ({
      status: 'ok',
      content: await c.contentService.list(
        req.ctx.principal,
        param(req, 'organisation'),
        param(req, 'dataset'),
        {
          limit: int(req, 'limit'),
          offset: int(req, 'offset'),
        },
      ),
    }));
    app.get(`${DS}/errors`, async (req) => {
      const r = await c.contentService.errors(
        req.ctx.principal,
        param(req, 'organisation'),
        param(req, 'dataset'),
        {
          limit: int(req, 'limit'),
          offset: int(req, 'offset'),
        },
      );
      return { status: 'ok', errors: r.errors.map(processingErrorBody), total_results: r.total };
    });
  };
