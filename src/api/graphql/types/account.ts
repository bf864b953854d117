import { Field, Float, Int, ObjectType } from 'type-graphql';
import { LimitType, RequestType, TokenKind } from './enums';

@ObjectType({ description: 'Who the Authorization header identifies.' })
export class Viewer {
  @Field(() => TokenKind)
  kind!: TokenKind;

  @Field(() => String, {
    nullable: true,
    description: 'The organisation of an org or dataset token.',
  })
  organisation?: string;

  @Field(() => String, { nullable: true, description: 'The dataset of a dataset token.' })
  dataset?: string;
}

@ObjectType()
export class Allowance {
  @Field(() => LimitType)
  limitType!: LimitType;

  @Field(() => Int, { nullable: true, description: 'Present when limitType is FIXED.' })
  limit?: number;
}

@ObjectType()
export class RequestCredit {
  @Field(() => RequestType)
  type!: RequestType;

  @Field(() => Float, { description: 'Credits charged per request of this type.' })
  credits!: number;
}

@ObjectType()
export class Plan {
  @Field(() => Allowance, { description: 'Monthly Vision API credits.' })
  credits!: Allowance;

  @Field(() => Allowance, { description: 'Yearly image processing.' })
  images!: Allowance;

  @Field(() => [RequestCredit])
  requestCredits!: RequestCredit[];
}

@ObjectType()
export class Organisation {
  @Field(() => String)
  name!: string;

  @Field(() => Plan)
  plan!: Plan;

  @Field(() => String, { description: 'ISO 8601 UTC.' })
  createdAt!: string;
}

@ObjectType({ description: 'An organisation token, as listed: its secret is never shown again.' })
export class OrgToken {
  @Field(() => String)
  prefix!: string;

  @Field(() => String)
  createdAt!: string;
}

@ObjectType({ description: 'A newly issued token: the secret is shown this once.' })
export class IssuedToken extends OrgToken {
  @Field(() => String)
  token!: string;
}

@ObjectType()
export class CreatedOrganisation {
  @Field(() => Organisation)
  organisation!: Organisation;

  @Field(() => String, { description: 'The first organisation token, shown once.' })
  token!: string;
}
