import { Field, Float, Int, ObjectType } from 'type-graphql';
import { DatasetStatus, LimitType, RequestType } from './enums';
import { RequestCredit } from './account';

@ObjectType()
export class CreditUsage {
  @Field(() => LimitType)
  limitType!: LimitType;

  @Field(() => Int, { nullable: true })
  limit?: number;

  @Field(() => Float, { nullable: true })
  remaining?: number;

  @Field(() => Float)
  used!: number;

  @Field(() => Int)
  month!: number;

  @Field(() => Int)
  year!: number;
}

@ObjectType()
export class ImageUsage {
  @Field(() => LimitType)
  limitType!: LimitType;

  @Field(() => Int, { nullable: true })
  limit?: number;

  @Field(() => Int, { nullable: true })
  remaining?: number;

  @Field(() => Int, { description: 'Images processed in the year.' })
  processed!: number;

  @Field(() => Int, { description: 'Images in use across all datasets.' })
  total!: number;

  @Field(() => Int)
  year!: number;
}

@ObjectType()
export class RequestUsage {
  @Field(() => RequestType)
  type!: RequestType;

  @Field(() => Int)
  requests!: number;

  @Field(() => Float)
  credits!: number;
}

@ObjectType()
export class DatasetUsage {
  @Field(() => String)
  name!: string;

  @Field(() => Int, { description: 'Active images in the dataset.' })
  images!: number;

  @Field(() => [RequestUsage])
  usage!: RequestUsage[];

  @Field(() => DatasetStatus, { nullable: true })
  status?: DatasetStatus;

  @Field(() => Boolean)
  deleted!: boolean;
}

@ObjectType()
export class Usage {
  @Field(() => CreditUsage)
  credits!: CreditUsage;

  @Field(() => ImageUsage)
  images!: ImageUsage;

  @Field(() => [DatasetUsage])
  datasets!: DatasetUsage[];

  @Field(() => String, { description: 'Time of the newest event included.' })
  lastUpdated!: string;

  @Field(() => [RequestCredit])
  requestCredits!: RequestCredit[];
}
