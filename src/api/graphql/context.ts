import DataLoader from 'dataloader';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { StoredItem } from '../../domain/item';
import type { Principal } from '../../services/principal';
import type { GraphqlServices } from './services';

export interface GqlContext {
  services: GraphqlServices;
  requestId: string;
  /** Scheme, host and port of the absolute URLs this request's answers carry. */
  baseUrl: string;
  /** The request's logger: what it logs carries the reqId of the HTTP request. */
  log: FastifyBaseLogger;
  /** The caller, authenticated on first use: schema introspection needs no token. */
  principal(): Promise<Principal>;
  /** Admin item lookups, batched per dataset within one request. */
  itemLoader(org: string, dataset: string): DataLoader<string, StoredItem | null>;
}

export function buildContext(
  services: GraphqlServices,
  req: FastifyRequest,
  publicBaseUrl: string | undefined,
): GqlContext {
  let auth: Promise<Principal> | undefined;
  // The HTTP layer may have checked the header already (for the rate-limit key).
  const principal = (): Promise<Principal> =>
    (auth ??= req.graphqlAuth ?? services.auth.authenticate(req.headers.authorization));
  return contextOf(services, {
    requestId: req.id,
    baseUrl: publicBaseUrl ?? `${req.protocol}://${req.host}`,
    log: req.log,
    principal,
  });
}

/** A context for a caller already authenticated elsewhere (a WebSocket's connection_init). */
export function contextOf(
  services: GraphqlServices,
  base: Pick<GqlContext, 'requestId' | 'baseUrl' | 'log' | 'principal'>,
): GqlContext {
  const { principal } = base;
  const loaders = new Map<string, DataLoader<string, StoredItem | null>>();
  return {
    services,
    ...base,
    itemLoader(org, dataset) {
      const key = JSON.stringify([org, dataset]);
      let l = loaders.get(key);
      if (!l) {
        l = new DataLoader<string, StoredItem | null>(
          async (ids) => {
            const items = await services.content.getItems(await principal(), org, dataset, [
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
