import { Field, Float, ID, ObjectType, registerEnumType } from 'type-graphql';

// Contract §18's near-duplicate report in GraphQL: the same groups as REST's `duplicates`.

export enum DuplicateKind {
  EXACT = 'exact',
  NEAR = 'near',
}
registerEnumType(DuplicateKind, {
  name: 'DuplicateKind',
  description: '`exact`: the same picture; `near`: crops, recompressions, resizes of one photo.',
});

@ObjectType()
export class DuplicateMember {
  @Field(() => ID)
  id!: string;

  @Field(() => Float, { description: 'Cosine distance to the group’s first item.' })
  distance!: number;
}

@ObjectType()
export class DuplicateGroup {
  @Field(() => ID, { description: 'Stable while the group keeps its first item.' })
  id!: string;

  @Field(() => DuplicateKind)
  kind!: DuplicateKind;

  @Field(() => [DuplicateMember], { description: 'The first item (smallest id) first.' })
  items!: DuplicateMember[];
}

@ObjectType({
  description: 'The dataset’s near-duplicate report (contract §18). Organisation token.',
})
export class DuplicateReport {
  @Field(() => String, { nullable: true, description: 'When the last pass finished; ISO 8601.' })
  computedAt!: string | null;

  @Field({ description: 'Items processed since the last pass wait for the next.' })
  pending!: boolean;

  @Field(() => [DuplicateGroup], { description: 'Largest first, then by first item id.' })
  groups!: DuplicateGroup[];

  @Field(() => String, { nullable: true })
  nextCursor!: string | null;
}
