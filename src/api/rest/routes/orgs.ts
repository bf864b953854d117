import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { int, param } from '../params';
import { organisationBody, tokenBody } from '../account-bodies';

export const orgRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    app.post('/orgs', async (req, reply) => {
      const r = await c.organisations.create(req.ctx.principal, req.body);
      return reply.status(201).send({ status: 'ok', ...r });
    });
    app.get('/orgs/:organisation', async (req) => ({
      status: 'ok',
      organisation: organisationBody(
        await c.organisations.get(req.ctx.principal, param(req, 'organisation')),
      ),
    }));
    app.put('/orgs/:organisation/plan', async (req) => ({
      status: 'ok',
      organisation: await c.organisations.setPlan(
        req.ctx.principal,
        param(req, 'organisation'),
        req.body,
      ),
    }));
    app.post('/orgs/:organisation/tokens', async (req, reply) => {
      const r = await c.organisations.issueToken(req.ctx.principal, param(req, 'organisation'));
      return reply.status(201).send({ status: 'ok', token: r.token, ...tokenBody(r) });
    });
    app.get('/orgs/:organisation/tokens', async (req) => ({
      status: 'ok',
      tokens: (await c.organisations.listTokens(req.ctx.principal, param(req, 'organisation'))).map(
        tokenBody,
      ),
    }));
    app.delete('/orgs/:organisation/tokens/:prefix', async (req) => {
      await c.organisations.revokeToken(
        req.ctx.principal,
        param(req, 'organisation'),
        param(req, 'prefix'),
      );
      return { status: 'ok' };
    });
    app.get('/orgs/:organisation/usage', async (req) => ({
      status: 'ok',
      usage: await c.usage.report(req.ctx.principal, param(req, 'organisation'), {
        year: int(req, 'year'),
        month: int(req, 'month'),
      }),
    }));
  };
