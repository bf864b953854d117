import type { FastifyPluginAsync } from 'fastify';
import { organisationBody, planBody, tokenBody, usageBody } from '../account-bodies';
import { serve } from '../operation';
import * as op from '../schema/account-ops';
import type { RestServices } from '../services';

export const orgRoutes =
  (s: Pick<RestServices, 'organisations' | 'usage'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.createOrganisation, async ({ body }, req) => {
      const r = await s.organisations.create(req.ctx.principal, body);
      return { status: 'ok', organisation: planBody(r.organisation), token: r.token };
    });
    serve(app, op.getOrganisation, async ({ params }, req) => ({
      status: 'ok',
      organisation: organisationBody(
        await s.organisations.get(req.ctx.principal, params.organisation),
      ),
    }));
    serve(app, op.setPlan, async ({ params, body }, req) => ({
      status: 'ok',
      organisation: planBody(
        await s.organisations.setPlan(req.ctx.principal, params.organisation, body.plan),
      ),
    }));
    serve(app, op.issueToken, async ({ params }, req) => {
      const r = await s.organisations.issueToken(req.ctx.principal, params.organisation);
      return { status: 'ok', token: r.token, ...tokenBody(r) };
    });
    serve(app, op.listTokens, async ({ params }, req) => ({
      status: 'ok',
      tokens: (await s.organisations.listTokens(req.ctx.principal, params.organisation)).map(
        tokenBody,
      ),
    }));
    serve(app, op.revokeToken, async ({ params }, req) => {
      await s.organisations.revokeToken(req.ctx.principal, params.organisation, params.prefix);
      return { status: 'ok' };
    });
    serve(app, op.usage, async ({ params, query }, req) => ({
      status: 'ok',
      usage: usageBody(await s.usage.report(req.ctx.principal, params.organisation, query)),
    }));
  };
