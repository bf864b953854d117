import { z } from 'zod';
import { LIMITS } from '../../../domain/limits';
import { WEBHOOK_EVENTS } from '../../../domain/webhook';
import { operation } from '../operation';
import { integer, orgParams } from './params';
import * as shape from './shapes';

// Webhooks (contract §17): registration and the delivery log, for organisation tokens.

const HOOKS = '/orgs/:organisation/webhooks';
const hookParams = orgParams.extend({
  id: z.string().meta({ description: 'The webhook id, wh_…' }),
});
const deliveryParams = hookParams.extend({
  delivery: z.string().meta({ description: 'The delivery id (its webhook-id header), msg_…' }),
});

const registration = z.object({
  url: z.string().meta({ description: 'http(s) URL that receives the signed POSTs' }),
  events: z.array(z.string()).meta({ description: `Any of ${WEBHOOK_EVENTS.join(', ')}` }),
  datasets: z
    .array(z.string())
    .optional()
    .meta({ description: 'Dataset names to follow; every dataset when absent' }),
});

const webhook = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENTS)),
    datasets: z.array(z.string()).nullable().meta({ description: 'null: every dataset' }),
    state: z.enum(['active', 'disabled']),
    disabled_reason: z.enum(['gone', 'retries_exhausted']).optional(),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'Webhook' });

const delivery = z
  .object({
    id: z.string().meta({ description: 'The webhook-id header it is sent with' }),
    type: z.enum(WEBHOOK_EVENTS),
    state: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    last_status: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'HTTP status of the last attempt' }),
    last_error: z
      .enum(['timeout', 'forbidden_address', 'connection'])
      .optional()
      .meta({ description: 'Why the last attempt got no HTTP answer' }),
    next_attempt_at: z.string().nullable().meta({ format: 'date-time' }),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WebhookDelivery' });

export const createWebhook = operation({
  id: 'createWebhook',
  method: 'POST',
  path: HOOKS,
  summary: 'Register a webhook; answers its signing secret once',
  tag: 'webhooks',
  access: 'organisation',
  params: orgParams,
  body: registration,
  status: 201,
  response: shape.ok.extend({
    webhook,
    secret: z.string().meta({ description: 'whsec_…; shown once, store it' }),
  }),
  errors: ['invalid_request', 'not_found'],
});

export const listWebhooks = operation({
  id: 'listWebhooks',
  method: 'GET',
  path: HOOKS,
  summary: 'The organisation’s webhooks',
  tag: 'webhooks',
  access: 'organisation',
  params: orgParams,
  status: 200,
  response: shape.ok.extend({ webhooks: z.array(webhook) }),
  errors: ['not_found'],
});

export const getWebhook = operation({
  id: 'getWebhook',
  method: 'GET',
  path: `${HOOKS}/:id`,
  summary: 'One webhook',
  tag: 'webhooks',
  access: 'organisation',
  params: hookParams,
  status: 200,
  response: shape.ok.extend({ webhook }),
  errors: ['not_found'],
});

export const deleteWebhook = operation({
  id: 'deleteWebhook',
  method: 'DELETE',
  path: `${HOOKS}/:id`,
  summary: 'Delete a webhook and its deliveries',
  tag: 'webhooks',
  access: 'organisation',
  params: hookParams,
  status: 200,
  response: shape.ok,
  errors: ['not_found'],
});

export const listDeliveries = operation({
  id: 'listWebhookDeliveries',
  method: 'GET',
  path: `${HOOKS}/:id/deliveries`,
  summary: `A webhook’s deliveries, newest first (the last ${LIMITS.webhookDeliveryLog})`,
  tag: 'webhooks',
  access: 'organisation',
  params: hookParams,
  query: z.object({ limit: integer(`At most this many (1–${LIMITS.webhookDeliveryLog})`) }),
  status: 200,
  response: shape.ok.extend({ deliveries: z.array(delivery) }),
  errors: ['invalid_request', 'not_found'],
});

export const retryDelivery = operation({
  id: 'retryWebhookDelivery',
  method: 'POST',
  path: `${HOOKS}/:id/deliveries/:delivery/retry`,
  summary: 'Attempt a delivery again now',
  tag: 'webhooks',
  access: 'organisation',
  params: deliveryParams,
  status: 202,
  response: shape.ok,
  errors: ['not_found'],
});
