import { Field, Float, ID, Int, ObjectType, registerEnumType } from 'type-graphql';
import type { StoredItem } from '../../../domain/item';
import { DatasetStatus, ItemState } from './enums';
import { JSONObjectScalar } from './scalars';

@ObjectType({ description: 'An array field enabled for querying, with its enabled values.' })
export class EnabledField {
  @Field(() => String)
  name!: string;

  @Field(() => [String], { description: '["*"] enables every value.' })
  values!: string[];
}

export enum TuningState {
  fitting = 'fitting',
  active = 'active',
  inactive = 'inactive',
  off = 'off',
}
registerEnumType(TuningState, {
  name: 'TuningState',
  description: 'Where tuned similarity stands (contract §20).',
});

@ObjectType({ description: 'Precision@10 held out by grouped cross-validation on the dataset.' })
export class CvPrecision {
  @Field(() => Float)
  plain!: number;

  @Field(() => Float)
  tuned!: number;
}

@ObjectType({
  description:
    "Similarity tuned to the catalogue's own labels (contract §20): while active, similarity ranks by (1 − weight) · cos(plain) + weight · cos(projected).",
})
export class SimilaritySetting {
  @Field(() => String, { nullable: true, description: 'The metadata field holding the labels.' })
  learnFrom!: string | null;

  @Field(() => Float)
  weight!: number;

  @Field(() => TuningState)
  state!: TuningState;

  @Field(() => String, { nullable: true, description: 'Why tuning is inactive.' })
  reason!: string | null;

  @Field(() => String, { nullable: true })
  fittedAt!: string | null;

  @Field(() => Int)
  labelledItems!: number;

  @Field(() => Int)
  classes!: number;

  @Field(() => CvPrecision, { nullable: true })
  cvPrecisionAt10!: CvPrecision | null;
}

@ObjectType()
export class DatasetSettings {
  @Field(() => [EnabledField])
  fields!: EnabledField[];

  @Field(() => Int, { description: 'Starts at 1; +1 on each change.' })
  version!: number;

  @Field(() => SimilaritySetting)
  similarity!: SimilaritySetting;
}

@ObjectType()
export class DatasetCounts {
  @Field(() => Int)
  items!: number;

  @Field(() => Int)
  processed!: number;

  @Field(() => Int)
  pending!: number;

  @Field(() => Int)
  errors!: number;
}

@ObjectType({ description: "The embedder the dataset's vectors are made with." })
export class DatasetEmbedder {
  @Field(() => String)
  id!: string;

  @Field(() => Int)
  dimensions!: number;

  @Field(() => Int, {
    description: 'Processed items still waiting for a vector from this embedder (after a change).',
  })
  reprocessing!: number;
}

@ObjectType({ description: 'A dataset as its organisation sees it (admin API).' })
export class Dataset {
  /** The organisation, for nested resolvers; not a schema field. */
  org!: string;

  @Field(() => String)
  name!: string;

  @Field(() => String, {
    description: 'The dataset token for the Vision API (the `vision` field).',
  })
  browseToken!: string;

  @Field(() => String)
  contentUrl!: string;

  @Field(() => String)
  processingErrorsUrl!: string;

  @Field(() => DatasetSettings)
  settings!: DatasetSettings;

  @Field(() => DatasetStatus)
  status!: DatasetStatus;

  @Field(() => String)
  createdAt!: string;

  @Field(() => DatasetCounts)
  counts!: DatasetCounts;
}

@ObjectType()
export class ImageInfo {
  @Field(() => Int)
  width!: number;

  @Field(() => Int)
  height!: number;

  @Field(() => String, { description: 'The URL the image was processed from.' })
  url!: string;
}

@ObjectType({ description: 'An item as stored, private metadata included (admin API).' })
export class StoredContentItem {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  url!: string;

  @Field(() => ItemState)
  state!: ItemState;

  @Field(() => JSONObjectScalar)
  metadata!: Record<string, unknown>;

  @Field(() => JSONObjectScalar)
  privateMetadata!: Record<string, unknown>;

  @Field(() => ImageInfo, { nullable: true, description: 'Set once the image is processed.' })
  image?: ImageInfo;

  @Field(() => String)
  createdAt!: string;

  @Field(() => String)
  updatedAt!: string;

  static from(i: StoredItem): StoredContentItem {
    return Object.assign(new StoredContentItem(), {
      id: i.id,
      url: i.url,
      state: i.state as ItemState,
      metadata: i.metadata,
      privateMetadata: i.privateMetadata,
      image: i.image,
      createdAt: new Date(i.createdAt).toISOString(),
      updatedAt: new Date(i.updatedAt).toISOString(),
    });
  }
}

@ObjectType({ description: 'One row of the content listing (GET content).' })
export class ContentEntry {
  org!: string;
  dataset!: string;

  @Field(() => ID)
  id!: string;

  @Field(() => String)
  url!: string;

  @Field(() => Boolean)
  processed!: boolean;
}

@ObjectType()
export class ContentPage {
  @Field(() => Int, { description: 'All items in the dataset.' })
  totalResults!: number;

  @Field(() => Int)
  offset!: number;

  @Field(() => Int)
  limit!: number;

  @Field(() => [ContentEntry], { description: 'In id (code point) order.' })
  entries!: ContentEntry[];
}

@ObjectType()
export class ProcessingError {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  url!: string;

  @Field(() => String, {
    description:
      'download_failed, not_found, too_large, unsupported_format, invalid_image, forbidden_address, timeout or quota_postponed.',
  })
  code!: string;

  @Field(() => String)
  message!: string;

  @Field(() => Int)
  attempts!: number;

  @Field(() => String)
  occurredAt!: string;
}

@ObjectType()
export class ProcessingErrorPage {
  @Field(() => Int)
  totalResults!: number;

  @Field(() => [ProcessingError])
  entries!: ProcessingError[];
}

@ObjectType()
export class WriteResult {
  @Field(() => Int, {
    description: 'Items accepted; their images are processed in the background.',
  })
  accepted!: number;
}
