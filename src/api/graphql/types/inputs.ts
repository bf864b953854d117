import { Field, ID, InputType, Int } from 'type-graphql';
import { LimitType, RequestType } from './enums';
import { JSONObjectScalar } from './scalars';

// Inputs carry types only; the rules (lengths, URL forms, metadata types, limits) are checked by
// the same domain validation as REST, which names the item index and field of every problem.

@InputType()
export class AllowanceInput {
  @Field(() => LimitType)
  limitType!: LimitType;

  @Field(() => Int, { nullable: true, description: 'Required when limitType is FIXED.' })
  limit?: number;
}

@InputType()
export class RequestCreditsInput {
  @Field(() => Number, { nullable: true })
  search?: number;

  @Field(() => Number, { nullable: true })
  similar?: number;

  @Field(() => Number, { nullable: true })
  explore?: number;

  @Field(() => Number, { nullable: true })
  lens?: number;

  @Field(() => Number, { nullable: true })
  collection?: number;
}

@InputType()
export class PlanInput {
  @Field(() => AllowanceInput, { nullable: true })
  credits?: AllowanceInput;

  @Field(() => AllowanceInput, { nullable: true })
  images?: AllowanceInput;

  @Field(() => RequestCreditsInput, { nullable: true })
  requestCredits?: RequestCreditsInput;
}

@InputType()
export class ContentItemInput {
  @Field(() => ID)
  id!: string;

  @Field(() => String, { description: 'http(s) URL of a JPEG or PNG image.' })
  url!: string;

  @Field(() => JSONObjectScalar, { nullable: true })
  metadata?: Record<string, unknown>;

  @Field(() => JSONObjectScalar, { nullable: true })
  privateMetadata?: Record<string, unknown>;
}

@InputType({
  description:
    'A partial update: omitted fields keep their value; a metadata key set to null is removed.',
})
export class ContentUpdateInput {
  @Field(() => ID)
  id!: string;

  @Field(() => String, { nullable: true })
  url?: string;

  @Field(() => JSONObjectScalar, { nullable: true })
  metadata?: Record<string, unknown>;

  @Field(() => JSONObjectScalar, { nullable: true })
  privateMetadata?: Record<string, unknown>;
}

@InputType()
export class EnabledFieldInput {
  @Field(() => String)
  name!: string;

  @Field(() => [String], { description: 'Values to enable, or ["*"] for all.' })
  values!: string[];
}

@InputType({ description: 'A scoped token payload (contract §16); every field optional.' })
export class ScopedTokenInput {
  @Field(() => String, { nullable: true, description: 'A q filter ANDed into every request.' })
  q?: string;

  @Field(() => Int, { nullable: true, description: 'Expiry, Unix seconds.' })
  exp?: number;

  @Field(() => [RequestType], {
    nullable: true,
    description: 'Billable request types allowed; details, fields and track always are.',
  })
  types?: RequestType[];

  @Field(() => [String], { nullable: true, description: 'The metadata fields that may be seen.' })
  fields?: string[];

  @Field(() => Int, { nullable: true, description: 'Requests per minute for this token.' })
  rate?: number;

  @Field(() => String, { nullable: true, description: "Recorded as the events' user_id." })
  uid?: string;
}
