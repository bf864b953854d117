import { ArgsType, Field, Float, Int, ObjectType, registerEnumType } from 'type-graphql';
import { GroupInput } from './search';
import { VisionItem } from './vision';

/** What every similarity request takes besides its target (contract §7, §15). */
@ArgsType()
export class SimilarityArgs {
  @Field(() => Int, { defaultValue: 10 })
  limit!: number;

  @Field(() => String, { nullable: true })
  q?: string;

  @Field(() => String, { nullable: true })
  v?: string;

  @Field(() => GroupInput, {
    nullable: true,
    description: 'One result per group of this field (contract §13).',
  })
  group?: GroupInput;

  @Field(() => Float, {
    nullable: true,
    description:
      '0–1: maximal marginal relevance over the `candidates` nearest items (contract §15); 0 is plain similarity. Scores stay the similarity to the query.',
  })
  diversity?: number;

  @Field(() => Int, {
    nullable: true,
    description: 'With diversity: how many nearest items to choose from (limit to 500; 4 × limit).',
  })
  candidates?: number;

  @Field(() => Float, {
    nullable: true,
    description: '0–1: results scoring below are left out (a page may be short).',
  })
  minScore?: number;

  @Field(() => Boolean, {
    nullable: true,
    description:
      'Rank every item matching q exactly (no approximate index); the *Page fields then give totalResults.',
  })
  exhaustive?: boolean;
}

/** Similarity requests that page (contract §15: similar, collection, lens). */
@ArgsType()
export class PagedSimilarityArgs extends SimilarityArgs {
  @Field(() => Int, {
    nullable: true,
    description: 'From 1; page × limit ≤ 1000. Page 2 continues page 1 with no repeat or gap.',
  })
  page?: number;
}

export enum CollectionStrategy {
  CENTROID = 'centroid',
  BEST_SCORE = 'best_score',
}
registerEnumType(CollectionStrategy, {
  name: 'CollectionStrategy',
  description:
    'CENTROID ranks by similarity to mean(positives) + (mean(positives) − mean(negatives)); BEST_SCORE ranks each item by its best positive, below all others when a negative is as near (contract §15).',
});

@ObjectType({ description: 'A page of similarity results (contract §15).' })
export class SimilarityPage {
  @Field(() => [VisionItem])
  results!: VisionItem[];

  @Field(() => Int)
  page!: number;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int, {
    nullable: true,
    description: 'With exhaustive: how many items matching q were ranked (inputs left out).',
  })
  totalResults?: number;

  @Field(() => Boolean, {
    description: 'Whether a next page may hold results (false at the 1,000-result depth).',
  })
  hasNextPage!: boolean;
}
