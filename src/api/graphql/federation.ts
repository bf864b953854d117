import DataLoader from 'dataloader';
import { notFound } from '../../domain/errors';
import { LIMITS } from '../../domain/limits';
import type { GqlContext } from './context';
import { toVisionItem } from './map';
import type { VisionItem } from './types/vision';

/** What another subgraph returns for a VisionItem: its `@key` fields. */
export interface VisionItemReference {
  organisation: string;
  dataset: string;
  id: string;
}

type Loader = DataLoader<string, VisionItem>;

/** One map of loaders per request: a loader caches its answers, so it never outlives one. */
const loadersOf = new WeakMap<GqlContext, Map<string, Loader>>();

/**
 * `_entities` for VisionItem (contract §19): the references of one request are read through the
 * Vision API's details, one read per (organisation, dataset) and tick, with the request's token.
 * A dataset outside the token's reach fails every reference to it with the error a `details`
 * query gets (`not_found`, or `forbidden` for an organisation token); an id that is unknown or not
 * processed yet is `not_found`. Either way the entity is null with that error entry.
 */
export function resolveVisionItemReference(
  ref: VisionItemReference,
  ctx: GqlContext,
): Promise<VisionItem> {
  let loaders = loadersOf.get(ctx);
  if (!loaders) loadersOf.set(ctx, (loaders = new Map()));
  const key = JSON.stringify([ref.organisation, ref.dataset]);
  let loader = loaders.get(key);
  if (!loader) {
    const { organisation: org, dataset } = ref;
    loader = new DataLoader<string, VisionItem>(
      async (ids) => {
        const items = await ctx.services.vision.details(await ctx.principal(), org, dataset, ids);
        const byId = new Map(items.map((i) => [i.id, i]));
        const link = { baseUrl: ctx.baseUrl, org, dataset, carry: {} };
        return ids.map((id) => {
          const item = byId.get(id);
          return item
            ? toVisionItem(item, link)
            : notFound(`item '${id}' not found (or not processed yet)`);
        });
      },
      { maxBatchSize: LIMITS.detailsMaxIds },
    );
    loaders.set(key, loader);
  }
  return loader.load(ref.id);
}
