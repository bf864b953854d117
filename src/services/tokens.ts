import crypto from 'node:crypto';
import type { TokenKind, TokenRecord } from '../ports/account-store';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const TOKEN = /^(op|org|ds)_([A-Za-z0-9]{12})_([A-Za-z0-9]{32})$/;

function base62(bytes: Buffer, length: number): string {
  let out = '';
  for (const b of bytes) {
    if (out.length === length) break;
    // 248 = 4 × 62: rejecting the top values keeps the alphabet uniform.
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
}

const randomBase62 = (length: number): string => {
  let s = '';
  while (s.length < length) s += base62(crypto.randomBytes(length * 2), length - s.length);
  return s;
};

export const hashToken = (token: string): string =>
  crypto.createHash('sha256').update(token).digest('hex');

export function tokenEquals(token: string, hash: string): boolean {
  const a = Buffer.from(hashToken(token), 'hex');
  const b = Buffer.from(hash, 'hex');
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

/** `<kind>_<12 public chars>_<32 secret chars>`; the prefix `<kind>_<12>` names it for revocation. */
export function parseToken(token: string): { kind: TokenKind; prefix: string } | undefined {
  const m = TOKEN.exec(token);
  return m ? { kind: m[1] as TokenKind, prefix: `${m[1]}_${m[2]}` } : undefined;
}

export interface IssuedToken {
  token: string;
  record: TokenRecord;
}

export function issueToken(
  kind: TokenKind,
  scope: { org?: string; datasetId?: string },
  now: Date,
): IssuedToken {
  const token = `${kind}_${randomBase62(12)}_${randomBase62(32)}`;
  return { token, record: recordFor(token, kind, scope, now) };
}

function recordFor(
  token: string,
  kind: TokenKind,
  scope: { org?: string; datasetId?: string },
  now: Date,
): TokenRecord {
  return {
    prefix: parseToken(token)!.prefix,
    kind,
    ...scope,
    hash: hashToken(token),
    createdAt: now.toISOString(),
  };
}

/**
 * Browse tokens are shown on every dataset read, so they are derived (HMAC of the server key,
 * dataset id and rotation counter) instead of stored: the database holds only their hash.
 */
export function browseToken(
  serverKey: Buffer,
  org: string,
  datasetId: string,
  rotation: number,
  now: Date,
): IssuedToken {
  const mac = (label: string): Buffer =>
    crypto.createHmac('sha256', serverKey).update(`${label}:${datasetId}:${rotation}`).digest();
  const token = `ds_${base62(Buffer.concat([mac('p'), mac('p2')]), 12)}_${base62(Buffer.concat([mac('s'), mac('s2')]), 32)}`;
  return { token, record: recordFor(token, 'ds', { org, datasetId }, now) };
}
