import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import type { AuthFailureLimit } from '../http/rate-limit';
import { contentRoutes } from './routes/content';
import { datasetRoutes } from './routes/datasets';
import { healthRoutes } from './routes/health';
import { metricsRoute } from './routes/metrics';
import { openApiRoute } from './routes/openapi';
import { orgRoutes } from './routes/orgs';
import { visionRoutes } from './routes/vision';
import type { OpsServices, RestServices } from './services';

/**
 * The release /openapi.json names: the nearest package.json above this file (src/, dist/ and the
 * benchmarks' bench/dist/src/ sit at different depths below the root).
 */
function releaseVersion(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    try {
      return (
        JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }
      ).version;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || dir === path.dirname(dir)) throw e;
    }
  }
}
const VERSION = releaseVersion();

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
  };
