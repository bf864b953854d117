import type { ServiceSet } from '../../services/service-set';

/** What the GraphQL transport calls: services only, never a port or the composition root. */
export type GraphqlServices = Pick<
  ServiceSet,
  | 'auth'
  | 'organisations'
  | 'datasets'
  | 'datasetEvents'
  | 'content'
  | 'vision'
  | 'similarity'
  | 'track'
  | 'report'
  | 'usage'
  | 'metrics'
  | 'webhooks'
  | 'duplicates'
>;
