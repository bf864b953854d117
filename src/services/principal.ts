import type { ScopedToken } from './scoped-tokens';

/** Who is calling, as established from the Authorization header. */
export type Principal =
  | { kind: 'operator' }
  | { kind: 'org'; org: string; prefix: string }
  | { kind: 'dataset'; org: string; datasetId: string }
  /** Parsed only: it names no dataset, so its signature is checked against the one asked for. */
  | { kind: 'scoped'; token: ScopedToken };
