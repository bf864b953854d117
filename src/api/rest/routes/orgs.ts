import type { FastifyPluginAsync } from 'fastify';
import type { Container } from '../../../app/container';
import { organisationBody, tokenBody } from '../account-bodies';
import { serve } from '../operation';
import * as op from '../schema/account-ops';

export const orgRoutes =
  (c: Container): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.createOrganisation, async ({ body }, req) => ({
      status: 'ok',
      ...(await c.organisations.create(req.ctx.principal, body)),
    }));
    serve(app, op.getOrganisation, async ({ params }, req) => ({
      status: 'ok',
      organisation: organisationBody(
        await c.organisations.get(req.ctx.principal, params.organisation),
      ),
    }));
    serve(app, op.setPlan, async ({ params, body }, req) => ({
      status: 'ok',
      organisation: await c.organisations.setPlan(req.ctx.principal, params.organisation, body),
    }));
    serve(app, op.issueToken, async ({ params }, req) => {
      const r = await c.organisations.issueToken(req.ctx.principal, params.organisation);
      return { status: 'ok', token: r.token, ...tokenBody(r) };
    });
    serve(app, op.listTokens, async ({ params }, req) => ({
      status: 'ok',
      tokens: (await c.organisations.listTokens(req.ctx.principal, params.organisation)).map(
        tokenBody,
      ),
    }));
    serve(app, op.revokeToken, async ({ params }, req) => {
      await c.organisations.revokeToken(req.ctx.principal, params.organisation, params.prefix);
      return { status: 'ok' };
    });
    serve(app, op.usage, async ({ params, query }, req) => ({
      status: 'ok',
      usage: await c.usage.report(req.ctx.principal, params.organisation, query),
    }));
  };
