import { Field, Float, InputType, Int, ObjectType } from 'type-graphql';
import { CalendarInterval } from './enums';

// Contract §10 in GraphQL: the same figures as REST's facets/stats/histograms keys, typed.

@InputType({ description: 'A field to count values of among all matching items.' })
export class FacetInput {
  @Field(() => String)
  field!: string;

  @Field(() => Boolean, {
    defaultValue: false,
    description: 'Count without the q conditions on this same field (multi-select filters).',
  })
  disjunctive!: boolean;
}

@InputType({
  description: 'A numeric field with an interval, or a service time field with a calendar unit.',
})
export class HistogramInput {
  @Field(() => String)
  field!: string;

  @Field(() => Float, { nullable: true, description: 'Bucket width for a numeric field.' })
  interval?: number;

  @Field(() => CalendarInterval, {
    nullable: true,
    description: 'For service_created_at / service_updated_at.',
  })
  calendar?: CalendarInterval;
}

@ObjectType()
export class FacetBucket {
  @Field(() => String, { description: 'The value as JSON text ("red", "12.5", "true").' })
  value!: string;

  @Field(() => Int)
  count!: number;
}

@ObjectType({ description: 'The most frequent values of a field among all matching items.' })
export class SearchFacet {
  @Field(() => String)
  field!: string;

  @Field(() => [FacetBucket])
  buckets!: FacetBucket[];

  @Field(() => Int, { description: 'Values counted but not listed.' })
  other!: number;

  @Field(() => Int, { description: 'Matching items without the field.' })
  missing!: number;

  @Field(() => Boolean, {
    description:
      'False when grouped counts were estimated (more matching groups than counted exactly, contract §13).',
  })
  exact!: boolean;
}

@ObjectType({ description: 'Over the numeric values of the field in all matching items.' })
export class FieldStats {
  @Field(() => String)
  field!: string;

  @Field(() => Int)
  count!: number;

  @Field(() => Float, { nullable: true })
  min!: number | null;

  @Field(() => Float, { nullable: true })
  max!: number | null;

  @Field(() => Float, { nullable: true })
  avg!: number | null;

  @Field(() => Float)
  sum!: number;
}

@ObjectType()
export class HistogramBucket {
  @Field(() => Float, { description: 'Inclusive lower bound (epoch ms for time fields).' })
  from!: number;

  @Field(() => Float, { description: 'Exclusive upper bound (epoch ms for time fields).' })
  to!: number;

  @Field(() => String, { nullable: true, description: 'from as ISO 8601 (time fields).' })
  fromTime?: string;

  @Field(() => String, { nullable: true, description: 'to as ISO 8601 (time fields).' })
  toTime?: string;

  @Field(() => Int)
  count!: number;
}

@ObjectType({ description: 'Buckets from the smallest value to the largest, empty ones included.' })
export class FieldHistogram {
  @Field(() => String)
  field!: string;

  @Field(() => [HistogramBucket])
  buckets!: HistogramBucket[];
}

@InputType()
export class RangeInput {
  @Field(() => Float, { nullable: true })
  gte?: number;

  @Field(() => Float, { nullable: true })
  lte?: number;
}

@InputType({
  description:
    'Tests on one field, all of which must hold. Values are matched as in q (contract §5): a value matches a string exactly, a number or boolean when it reads as one.',
})
export class FieldTestInput {
  @Field(() => String)
  field!: string;

  @Field(() => String, { nullable: true })
  eq?: string;

  @Field(() => [String], { nullable: true, description: 'Any of these values.' })
  in?: string[];

  @Field(() => [String], { nullable: true, description: 'None of these values.' })
  not?: string[];

  @Field(() => RangeInput, { nullable: true, description: 'Inclusive; numbers (or epoch ms).' })
  range?: RangeInput;

  @Field(() => Boolean, { nullable: true, description: 'The field holds a value (or not).' })
  exists?: boolean;
}

@InputType({
  description:
    'A typed filter, compiled to the same query as q: every part given must hold (where, each of and, one of or, not not).',
})
export class FilterInput {
  @Field(() => FieldTestInput, { nullable: true })
  where?: FieldTestInput;

  @Field(() => [FilterInput], { nullable: true })
  and?: FilterInput[];

  @Field(() => [FilterInput], { nullable: true })
  or?: FilterInput[];

  @Field(() => FilterInput, { nullable: true })
  not?: FilterInput;
}
