import { Field, ObjectType, registerEnumType } from 'type-graphql';
import { DatasetCounts } from './dataset';
import { DatasetStatus } from './enums';

export enum DatasetEventType {
  ITEMS_PROCESSED = 'items.processed',
  ITEMS_FAILED = 'items.failed',
  DATASET_PUBLISHED = 'dataset.published',
}
registerEnumType(DatasetEventType, {
  name: 'DatasetEventType',
  valuesConfig: {
    ITEMS_PROCESSED: { description: 'Items processed (and searchable).' },
    ITEMS_FAILED: {
      description: "Items that failed for good; the dataset's processing errors say why.",
    },
    DATASET_PUBLISHED: {
      description: 'The dataset became `PUBLISHED` (enough processed items); no item ids.',
    },
  },
});

@ObjectType({
  description:
    "Live progress of a dataset (contract §17), with the dataset's counts and status after it. Best effort: counts are absolute, so a missed event heals with the next; use webhooks when every id matters.",
})
export class DatasetEvent {
  @Field(() => DatasetEventType)
  type!: DatasetEventType;

  @Field(() => [String])
  itemIds!: string[];

  @Field(() => DatasetCounts)
  counts!: DatasetCounts;

  @Field(() => DatasetStatus)
  status!: DatasetStatus;
}
