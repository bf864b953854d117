import { Field, Int, ObjectType } from 'type-graphql';
import { FieldHistogram, FieldStats, SearchFacet } from './figures';
import { VisionItem } from './vision';

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
