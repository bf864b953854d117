/** Who is calling, as established from the Authorization header. */
export type Principal =
  | { kind: 'operator' }
  | { kind: 'org'; org: string; prefix: string }
  | { kind: 'dataset'; org: string; datasetId: string };
