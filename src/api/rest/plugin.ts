import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import { PROJECT_ROOT } from '../../lib/project-root';
import type { AuthFailureLimit } from '../http/rate-limit';
import { contentRoutes } from './routes/content';
import { datasetRoutes } from './routes/datasets';
import { duplicateRoutes } from './routes/duplicates';
import { healthRoutes } from './routes/health';
import { metricsRoute } from './routes/metrics';
import { openApiRoute } from './routes/openapi';
import { orgRoutes } from './routes/orgs';
import { visionRoutes } from './routes/vision';
import { webhookRoutes } from './routes/webhooks';
import type { OpsServices, RestServices } from './services';

/** The release /openapi.json names. */
const VERSION = (
  JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

/** /healthz, /readyz and /metrics: what every process serves, a worker-only one included. */
export const opsRoutes =
  (s: OpsServices, authFailed: AuthFailureLimit): FastifyPluginAsync =>
  async (app) => {
    await app.register(healthRoutes(s));
    await app.register(metricsRoute(s, authFailed));
  };

/** The REST compatibility routes of interface.md and the contract, with /openapi.json. */
export const restApi =
  (s: RestServices, authFailed: AuthFailureLimit): FastifyPluginAsync =>
  async (app) => {
    await app.register(opsRoutes(s, authFailed));
    await app.register(openApiRoute(VERSION));
    await app.register(orgRoutes(s));
    await app.register(datasetRoutes(s));
    await app.register(contentRoutes(s));
    await app.register(visionRoutes(s));
    await app.register(webhookRoutes(s));
    await app.register(duplicateRoutes(s));
  };
