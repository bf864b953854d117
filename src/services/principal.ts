/** Who is calling, as established from the Authorization header. */
export type Principal =
  | { kind: 'operator' }
  | { kind: 'org'; org: string; prefix: string }
  | { kind: 'dataset'; org: string; datasetId: string };

export interface RequestContext {
  principal: Principal;
  /** Scheme, host and port used in absolute URLs (PUBLIC_BASE_URL or the request's own). */
  baseUrl: string;
  requestId: string;
}
