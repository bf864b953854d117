import type { ServiceSet } from '../../services/service-set';

/** What the REST transport calls: services only, never a port or the composition root. */
export type RestServices = Pick<
  ServiceSet,
  | 'auth'
  | 'organisations'
  | 'datasets'
  | 'content'
  | 'vision'
  | 'similarity'
  | 'track'
  | 'report'
  | 'usage'
  | 'readiness'
  | 'metrics'
  | 'webhooks'
  | 'duplicates'
>;

/** What a worker-only process serves over HTTP: health and metrics. */
export type OpsServices = Pick<ServiceSet, 'auth' | 'readiness' | 'metrics'>;
