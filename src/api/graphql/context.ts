import DataLoader from 'dataloader';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Container } from '../../app/container';
import type { StoredItem } from '../../domain/item';
import type { Principal, RequestContext } from '../../services/principal';

export interface GqlContext {
  c: Container;
  requestId: string;
  /** The request's logger: what it logs carries the reqId of the HTTP request. */
  log: FastifyBaseLogger;
  /** The caller, authenticated on first use: schema introspection needs no token. */
  request(): Promise<RequestContext>;
  principal(): Promise<Principal>;
  /** Admin item lookups, batched per dataset within one request. */
  itemLoader(org: string, dataset: string): DataLoader<string, StoredItem | null>;
}

export function buildContext(c: Container, req: FastifyRequest): GqlContext {
  const baseUrl = c.config.PUBLIC_BASE_URL ?? `${req.protocol}://${req.host}`;
  let auth: Promise<Principal> | undefined;
  // The HTTP layer may have checked the header already (for the rate-limit key).
  const principal = (): Promise<Principal> =>
    (auth ??= req.graphqlAuth ?? c.auth.authenticate(req.headers.authorization));
  const loaders = new Map<string, DataLoader<string, StoredItem | null>>();
  return {
    c,
    requestId: req.id,
    log: req.log,
    principal,
    async request() {
      return { principal: await principal(), baseUrl, requestId: req.id };
    },
    itemLoader(org, dataset) {
      const key = JSON.stringify([org, dataset]);
      let l = loaders.get(key);
      if (!l) {
        l = new DataLoader<string, StoredItem | null>(
          async (ids) => {
            const items = await c.contentService.getItems(await principal(), org, dataset, [
              ...ids,
            ]);
            const byId = new Map(items.map((i) => [i.id, i]));
            return ids.map((id) => byId.get(id) ?? null);
          },
          { maxBatchSize: 1000 },
        );
        loaders.set(key, l);
      }
      return l;
    },
  };
}
