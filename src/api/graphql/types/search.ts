import { Field, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { JSONScalar } from './scalars';
import { FieldHistogram, FieldStats, SearchFacet } from './figures';
import { VisionItem } from './vision';

@ObjectType()
export class SearchConnection {
  @Field(() => Int, { description: 'Every match, not only this page.' })
  totalResults!: number;

  @Field(() => Int, { nullable: true, description: 'With group: the matching groups.' })
  totalGroups?: number;

  @Field(() => Boolean, {
    nullable: true,
    description: 'With group: whether totalGroups is exact (it is up to 10,000 groups).',
  })
  totalGroupsExact?: boolean;

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

@InputType({ description: 'One result per value of a field (contract §13).' })
export class GroupInput {
  @Field(() => String, { description: 'The field whose values make the groups, e.g. parent.' })
  field!: string;

  @Field(() => Int, { defaultValue: 1, description: 'Items shown per group: 1 to 10.' })
  size!: number;
}

export enum FacetScope {
  GROUPS = 'groups',
  ITEMS = 'items',
}
registerEnumType(FacetScope, {
  name: 'FacetScope',
  description: 'Under group: what facets count (groups by default).',
});

@ObjectType({ description: "A result's group (contract §13)." })
export class ResultGroup {
  @Field(() => JSONScalar, {
    nullable: true,
    description: "The field's value; null for an item without it or with an array (alone).",
  })
  value!: string | number | boolean | null;

  @Field(() => Int, { description: "The group's items matching the request's filter." })
  count!: number;

  @Field(() => [VisionItem], {
    nullable: true,
    description: 'The further items of the group, up to size − 1 (only when size > 1).',
  })
  items?: VisionItem[];
}
