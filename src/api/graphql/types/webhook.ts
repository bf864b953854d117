import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';

export enum WebhookEventType {
  ITEMS_PROCESSED = 'items.processed',
  ITEMS_FAILED = 'items.failed',
  DATASET_PUBLISHED = 'dataset.published',
  USAGE_THRESHOLD = 'usage.threshold',
}
registerEnumType(WebhookEventType, {
  name: 'WebhookEventType',
  description: 'Events a webhook can receive (contract §17).',
});

export enum WebhookState {
  ACTIVE = 'active',
  DISABLED = 'disabled',
}
registerEnumType(WebhookState, {
  name: 'WebhookState',
  description: 'DISABLED after a 410 or when every scheduled attempt of a delivery failed.',
});

export enum WebhookDeliveryState {
  PENDING = 'pending',
  DELIVERED = 'delivered',
  FAILED = 'failed',
}
registerEnumType(WebhookDeliveryState, { name: 'WebhookDeliveryState' });

@ObjectType({ description: 'A registered webhook (contract §17).' })
export class Webhook {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  url!: string;

  @Field(() => [WebhookEventType])
  events!: WebhookEventType[];

  @Field(() => [String], {
    nullable: true,
    description: 'Names of the datasets it follows; null: every dataset of the organisation.',
  })
  datasets!: string[] | null;

  @Field(() => WebhookState)
  state!: WebhookState;

  @Field(() => String, { nullable: true, description: '`gone` (410) or `retries_exhausted`.' })
  disabledReason?: string;

  @Field(() => String, { description: 'ISO 8601 UTC.' })
  createdAt!: string;

  /** Who owns it, for the deliveries field (not in the schema). */
  org!: string;
}

@ObjectType({ description: 'One event sent (or to be sent) to a webhook.' })
export class WebhookDelivery {
  @Field(() => ID, { description: 'The `webhook-id` header it is sent with.' })
  id!: string;

  @Field(() => WebhookEventType)
  type!: WebhookEventType;

  @Field(() => WebhookDeliveryState)
  state!: WebhookDeliveryState;

  @Field(() => Int)
  attempts!: number;

  @Field(() => Int, { nullable: true, description: 'HTTP status of the last attempt.' })
  lastStatus!: number | null;

  @Field(() => String, {
    nullable: true,
    description: 'Why the last attempt got no HTTP answer: timeout, forbidden_address, connection.',
  })
  lastError?: string;

  @Field(() => String, { nullable: true, description: 'ISO 8601 UTC; null unless pending.' })
  nextAttemptAt!: string | null;

  @Field(() => String, { description: 'ISO 8601 UTC.' })
  createdAt!: string;
}

@ObjectType({ description: 'A new webhook and its signing secret, shown this once.' })
export class WebhookCreation {
  @Field(() => Webhook)
  webhook!: Webhook;

  @Field(() => String, { description: 'whsec_…: verify signatures with it (Standard Webhooks).' })
  secret!: string;
}

@InputType()
export class WebhookInput {
  @Field(() => String)
  url!: string;

  @Field(() => [WebhookEventType])
  events!: WebhookEventType[];

  @Field(() => [String], { nullable: true, description: 'Dataset names; every dataset if absent.' })
  datasets?: string[] | null;
}
