import crypto from 'node:crypto';
import { scopePayloadSchema, type ScopePayload } from './scope-payload';

/**
 * Scoped tokens (contract §16): `st_` + P + `.` + S, P the base64url JSON payload and S its
 * HMAC-SHA256 under the dataset's scoped key. Stateless: any host holding the server key checks
 * one with no read beyond the dataset the request names.
 */

const TOKEN = /^st_([A-Za-z0-9_-]{2,8000})\.([A-Za-z0-9_-]{43})$/;

/** A scoped token as it arrived, parsed but not yet verified (the dataset's key is needed). */
export interface ScopedToken {
  /** P exactly as sent: the signature covers these bytes, so nothing is re-serialised. */
  readonly p: string;
  readonly sig: Buffer;
  readonly claims: ScopePayload;
}

/**
 * The dataset's signing key: derived from the server key, the dataset and its browse-token
 * rotation, so rotating the browse token invalidates every scoped token. Its own label keeps
 * it unrelated to the browse token derived from the same inputs.
 */
export function scopedKey(serverKey: Buffer, datasetId: string, rotation: number): string {
  const mac = crypto
    .createHmac('sha256', serverKey)
    .update(`sk:${datasetId}:${rotation}`)
    .digest('base64url');
  return `sk_${mac}`;
}

const sign = (key: string, p: string): Buffer =>
  crypto.createHmac('sha256', key).update(p).digest();

/** Undefined for anything that is not a well-formed scoped token (answered as 401). */
export function parseScoped(token: string): ScopedToken | undefined {
  const m = TOKEN.exec(token);
  if (!m) return undefined;
  const [, p, s] = m as unknown as [string, string, string];
  const bytes = Buffer.from(p, 'base64url');
  // Only the canonical spelling of P: no second string signs the same payload.
  if (bytes.toString('base64url') !== p) return undefined;
  const sig = Buffer.from(s, 'base64url');
  if (sig.length !== 32 || sig.toString('base64url') !== s) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  const claims = scopePayloadSchema.safeParse(raw);
  return claims.success ? { p, sig, claims: claims.data } : undefined;
}

export function verifyScoped(t: ScopedToken, key: string): boolean {
  return crypto.timingSafeEqual(sign(key, t.p), t.sig);
}

export function mintScoped(key: string, payload: ScopePayload): string {
  const p = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `st_${p}.${sign(key, p).toString('base64url')}`;
}

/** The allowance key of a token's `rate`: one per payload, whoever minted it and when. */
export const rateKeyOf = (t: ScopedToken, datasetId: string): string =>
  `st:${datasetId}:${crypto.createHash('sha256').update(t.p).digest('base64url').slice(0, 22)}`;
