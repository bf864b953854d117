import { Directive, Field, Float, ID, Int, ObjectType } from 'type-graphql';
import type { StoredItem } from '../../../domain/item';
import { ImageInfo } from './dataset';

@ObjectType({
  description:
    'A dataset through the Vision API (its dataset token). Every field is one request; `search` is billable, details and facets are not.',
})
export class Vision {
  org!: string;

  @Field(() => String)
  dataset!: string;
}

/**
 * A federation entity (contract §19): another subgraph returns `{ organisation, dataset, id }`
 * and the router resolves the rest here (federation.ts), with the request's dataset token.
 */
@Directive('@key(fields: "organisation dataset id")')
@ObjectType({ description: 'A processed item as the Vision API returns it: public metadata only.' })
export class VisionItem {
  /** The stored item; only its public parts are exposed. */
  item!: StoredItem;

  @Field(() => String)
  organisation!: string;

  @Field(() => String)
  dataset!: string;

  @Field(() => ID)
  id!: string;

  @Field(() => String, { description: 'The explore journey from this item (REST URL).' })
  exploreUrl!: string;

  @Field(() => Float, { nullable: true, description: 'Similarity 0–1 (similarity requests only).' })
  score?: number;

  @Field(() => ImageInfo, { nullable: true })
  image?: ImageInfo;

  @Field(() => String, { description: 'service_created_at, ISO 8601 UTC.' })
  createdAt!: string;

  @Field(() => String, { description: 'service_updated_at, ISO 8601 UTC.' })
  updatedAt!: string;

  @Field(() => Int, {
    description:
      'service_popularity: clicks (`a:click` track events naming this id) of the trailing 30 days.',
  })
  servicePopularity!: number;

  @Field(() => Int, {
    description:
      'service_purchases: purchased quantity (`a:purchase` events, `qty` each, default 1) of the trailing 30 days.',
  })
  servicePurchases!: number;
}
