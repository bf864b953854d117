import { FieldHistogram, FieldStats, SearchFacet } from './figures';
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
}

@ObjectType()
export class SearchConnection {
  @Field(() => Int, { description: 'Every match, not only this page.' })
  totalResults!: number;

  @Field(() => Int)
  page!: number;

  @Field(() => Int)
  limit!: number;

  @Field(() => Boolean)
  hasNextPage!: boolean;

  @Field(() => [VisionItem])
  results!: VisionItem[];

  @Field(() => [SearchFacet], { nullable: true, description: 'When facets were asked for.' })
  facets?: SearchFacet[];

  @Field(() => [FieldStats], { nullable: true, description: 'When stats were asked for.' })
  stats?: FieldStats[];

  @Field(() => [FieldHistogram], { nullable: true, description: 'When histograms were asked for.' })
  histograms?: FieldHistogram[];
}

@ObjectType()
export class FacetValue {
  @Field(() => String)
  value!: string;

  @Field(() => Int)
  count!: number;
}

@ObjectType({ description: 'Values of one field among the items matching q, most frequent first.' })
export class Facet {
  @Field(() => String)
  field!: string;

  @Field(() => [FacetValue])
  values!: FacetValue[];
}
