/**
 * Scoped tokens (contract §16): `st_<P>.<S>`, P the base64url JSON of the scope. The scope is not
 * secret, so the console reads it to learn what the token allows (request types) and until when
 * (`exp`); the service enforces it either way. The token names no dataset: a shared link carries
 * the organisation and the dataset as hints (`#token=…&org=…&dataset=…`).
 */

/** The request types a scope may allow; `content/details`, `content/fields` and `track` always are. */
export const REQUEST_TYPES = ['search', 'similar', 'explore', 'lens', 'collection'] as const;
export type RequestType = (typeof REQUEST_TYPES)[number];

/** A scoped token's payload: every key optional (absent: no restriction of that kind). */
export interface ScopedPayload {
  q?: string;
  /** Unix seconds. */
  exp?: number;
  types?: RequestType[];
  fields?: string[];
  /** Requests per minute. */
  rate?: number;
  uid?: string;
}

export const isScopedToken = (token: string): boolean => token.startsWith('st_');

/** The payload of a scoped token, or undefined when it is none or cannot be read. */
export function decodeScoped(token: string): ScopedPayload | undefined {
  if (!isScopedToken(token)) return undefined;
  const p = token.slice(3).split('.')[0] ?? '';
  if (!p) return undefined;
  try {
    const b64 = p.replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const json = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
    const v: unknown = JSON.parse(json);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as ScopedPayload) : undefined;
  } catch {
    return undefined;
  }
}

/** What the console may offer with a token: every type unless a scope's `types` says otherwise. */
export type Allowed = (type: RequestType) => boolean;
export const allowAll: Allowed = () => true;
export const allowedBy =
  (scope: ScopedPayload | undefined): Allowed =>
  (type) =>
    !scope?.types || scope.types.includes(type);

/** When the scope ends, if it does. */
export const expiryOf = (scope: ScopedPayload | undefined): Date | undefined =>
  typeof scope?.exp === 'number' ? new Date(scope.exp * 1000) : undefined;

export const formatWhen = (d: Date): string =>
  d.toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });

/** The console link that signs in with a scoped token on one dataset. */
export const scopedLink = (token: string, org: string, dataset: string): string =>
  `${location.origin}/#${new URLSearchParams({ token, org, dataset }).toString()}`;
