import { registerEnumType } from 'type-graphql';

export enum SortOrder {
  ASC = 'asc',
  DESC = 'desc',
}
registerEnumType(SortOrder, { name: 'SortOrder' });

export enum DatasetStatus {
  /** Fewer than 200 processed items: the Vision API answers dataset_not_ready. */
  PENDING = 'pending',
  PUBLISHED = 'published',
}
registerEnumType(DatasetStatus, { name: 'DatasetStatus' });

export enum LimitType {
  FIXED = 'fixed',
  UNLIMITED = 'unlimited',
}
registerEnumType(LimitType, { name: 'LimitType' });

export enum RequestType {
  SEARCH = 'search',
  SIMILAR = 'similar',
  EXPLORE = 'explore',
  LENS = 'lens',
  COLLECTION = 'collection',
}
registerEnumType(RequestType, {
  name: 'RequestType',
  description: 'Billable Vision API request types (contract §8).',
});

export enum ItemState {
  PENDING = 'pending',
  PROCESSED = 'processed',
  FAILED = 'failed',
}
registerEnumType(ItemState, { name: 'ItemState' });

export enum TokenKind {
  OPERATOR = 'operator',
  ORGANISATION = 'org',
  DATASET = 'dataset',
  /** A scoped token (contract §16): it names no dataset until a request does. */
  SCOPED = 'scoped',
}
registerEnumType(TokenKind, { name: 'TokenKind' });

export enum CalendarInterval {
  HOUR = 'hour',
  DAY = 'day',
  WEEK = 'week',
  MONTH = 'month',
}
registerEnumType(CalendarInterval, {
  name: 'CalendarInterval',
  description: 'Histogram buckets of the service time fields (UTC; weeks start on Monday).',
});
