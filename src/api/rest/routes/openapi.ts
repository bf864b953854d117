import type { FastifyPluginAsync } from 'fastify';
import { openApiDocument } from '../openapi';
import { serve } from '../operation';
import * as op from '../schema/service-ops';

/** GET /openapi.json (contract §12), built once: the operations do not change while running. */
export const openApiRoute =
  (version: string): FastifyPluginAsync =>
  async (app) => {
    const document = openApiDocument(version);
    serve(app, op.openapi, async () => document);
  };
