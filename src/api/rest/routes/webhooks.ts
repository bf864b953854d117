import type { FastifyPluginAsync } from 'fastify';
import type { DeliveryView, WebhookView } from '../../../services/webhooks';
import { serve } from '../operation';
import * as op from '../schema/webhook-ops';
import type { RestServices } from '../services';

const webhookBody = (w: WebhookView) => ({
  id: w.id,
  url: w.url,
  events: w.events,
  datasets: w.datasets,
  state: w.state,
  ...(w.disabledReason ? { disabled_reason: w.disabledReason } : {}),
  created_at: w.createdAt.toISOString(),
});

const deliveryBody = (d: DeliveryView) => ({
  id: d.id,
  type: d.type,
  state: d.state,
  attempts: d.attempts,
  last_status: d.lastStatus,
  ...(d.lastError ? { last_error: d.lastError } : {}),
  next_attempt_at: d.nextAttemptAt?.toISOString() ?? null,
  created_at: d.createdAt.toISOString(),
});

export const webhookRoutes =
  (s: Pick<RestServices, 'webhooks'>): FastifyPluginAsync =>
  async (app) => {
    serve(app, op.createWebhook, async ({ params, body }, req) => {
      const made = await s.webhooks.create(req.ctx.principal, params.organisation, body);
      return { status: 'ok', webhook: webhookBody(made.webhook), secret: made.secret };
    });
    serve(app, op.listWebhooks, async ({ params }, req) => ({
      status: 'ok',
      webhooks: (await s.webhooks.list(req.ctx.principal, params.organisation)).map(webhookBody),
    }));
    serve(app, op.getWebhook, async ({ params }, req) => ({
      status: 'ok',
      webhook: webhookBody(await s.webhooks.get(req.ctx.principal, params.organisation, params.id)),
    }));
    serve(app, op.deleteWebhook, async ({ params }, req) => {
      await s.webhooks.delete(req.ctx.principal, params.organisation, params.id);
      return { status: 'ok' };
    });
    serve(app, op.listDeliveries, async ({ params, query }, req) => ({
      status: 'ok',
      deliveries: (
        await s.webhooks.deliveries(req.ctx.principal, params.organisation, params.id, query.limit)
      ).map(deliveryBody),
    }));
    serve(app, op.retryDelivery, async ({ params }, req) => {
      await s.webhooks.retry(req.ctx.principal, params.organisation, params.id, params.delivery);
      return { status: 'ok' };
    });
  };
