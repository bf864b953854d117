import { Registry } from 'prom-client';
import { z } from 'zod';
import { operation } from '../operation';
import { ok } from './shapes';

// The service's own routes (contract §1, §12): health, metrics and this document.

export const healthz = operation({
  id: 'healthz',
  method: 'GET',
  path: '/healthz',
  summary: 'The process is alive',
  tag: 'operations',
  access: 'none',
  status: 200,
  response: ok,
  errors: [],
});

const check = z.enum(['ok', 'unavailable']);
const readiness = z.object({
  status: check,
  checks: z.object({ accounts: check, store: check, queue: check }),
});

export const readyz = operation({
  id: 'readyz',
  method: 'GET',
  path: '/readyz',
  summary: 'The stores and the queue answer (503 with the same body when one does not)',
  tag: 'operations',
  access: 'none',
  status: 200,
  response: readiness,
  otherResponses: {
    503: { description: 'A store or the queue does not answer', schema: readiness },
  },
  errors: [],
});

export const metrics = operation({
  id: 'metrics',
  method: 'GET',
  path: '/metrics',
  summary: 'Prometheus metrics (operator token)',
  tag: 'operations',
  access: 'operator',
  checksTokenItself: true,
  status: 200,
  response: z.string().meta({ description: 'Prometheus text exposition format 0.0.4' }),
  responseType: Registry.PROMETHEUS_CONTENT_TYPE,
  errors: [],
});

export const openapi = operation({
  id: 'openapi',
  method: 'GET',
  path: '/openapi.json',
  summary: 'This document',
  tag: 'operations',
  access: 'none',
  status: 200,
  response: z.record(z.string(), z.unknown()).meta({ description: 'OpenAPI 3.1' }),
  errors: [],
});
