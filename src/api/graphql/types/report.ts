import { Field, Float, Int, ObjectType } from 'type-graphql';
import { CalendarInterval, RequestType } from './enums';

// Contract §11's analytics report in GraphQL: the same figures as REST's `analytics` body.

@ObjectType({ description: 'A name (request type or tracked action) and how often it occurred.' })
export class NamedCount {
  @Field()
  name!: string;

  @Field(() => Int)
  count!: number;
}

@ObjectType()
export class ReportInterval {
  @Field({ description: 'ISO 8601, inclusive.' })
  from!: string;

  @Field({ description: 'ISO 8601, exclusive (the last interval ends at the report’s `to`).' })
  to!: string;

  @Field(() => [NamedCount], { description: 'Billed requests per request type.' })
  requests!: NamedCount[];

  @Field(() => [NamedCount], { description: 'Tracked events per action (the 50 most frequent).' })
  events!: NamedCount[];

  @Field(() => Int)
  searches!: number;

  @Field(() => Int)
  zeroResultSearches!: number;
}

@ObjectType({ description: 'A value and the number of requests (or clicks) that used it.' })
export class RankedValue {
  @Field()
  value!: string;

  @Field(() => Int)
  count!: number;
}

@ObjectType()
export class ClickThroughFigures {
  @Field(() => RequestType)
  type!: RequestType;

  @Field(() => Int, { description: 'Requests of the type that carried a page_view_id.' })
  shown!: number;

  @Field(() => Int, {
    description: 'Clicks on an id those results showed, on the same page_view_id.',
  })
  clicks!: number;

  @Field(() => Float, {
    nullable: true,
    description: 'clicks ÷ shown; null when nothing was shown.',
  })
  rate!: number | null;
}

@ObjectType({ description: 'The dataset’s analytics report (contract §11). Organisation token.' })
export class AnalyticsReport {
  @Field()
  from!: string;

  @Field()
  to!: string;

  @Field(() => CalendarInterval)
  interval!: CalendarInterval;

  @Field(() => [ReportInterval])
  intervals!: ReportInterval[];

  @Field(() => Int)
  searches!: number;

  @Field(() => Int)
  zeroResultSearches!: number;

  @Field(() => Float, { nullable: true })
  zeroResultShare!: number | null;

  @Field(() => [RankedValue], { description: '`key` and `key:value` filter terms.' })
  topFilters!: RankedValue[];

  @Field(() => [RankedValue])
  topSortFields!: RankedValue[];

  @Field(() => [RankedValue])
  topClickedIds!: RankedValue[];

  @Field(() => [ClickThroughFigures])
  clickThrough!: ClickThroughFigures[];
}
