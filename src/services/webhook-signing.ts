import crypto from 'node:crypto';

/**
 * Webhook signing per Standard Webhooks 1.0 (contract §17): `webhook-signature: v1,<base64
 * HMAC-SHA256 over "<id>.<timestamp>.<body>">`, keyed with the bytes of the secret after
 * `whsec_`.
 */

const SECRET_PREFIX = 'whsec_';

/**
 * A webhook's secret: derived from the server key, the webhook and its salt instead of stored,
 * like browse tokens, so any worker can sign and no secret lies in the store. The label keeps
 * it unrelated to every other key derived from the server key.
 */
export function webhookSecret(serverKey: Buffer | string, webhookId: string, salt: string): string {
  const mac = crypto
    .createHmac('sha256', serverKey)
    .update(`webhook:${webhookId}:${salt}`)
    .digest('base64');
  return `${SECRET_PREFIX}${mac}`;
}

/** The key a secret stands for: its base64 after the prefix (the spec allows it without one). */
function secretBytes(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
}

/** The `webhook-signature` value for one attempt. */
export function signWebhook(
  secret: string,
  msgId: string,
  timestampS: number,
  body: string,
): string {
  const mac = crypto
    .createHmac('sha256', secretBytes(secret))
    .update(`${msgId}.${timestampS}.${body}`)
    .digest('base64');
  return `v1,${mac}`;
}

const USER_AGENT = 'visual-search-service/0.1 (webhooks)';

/**
 * The headers of one attempt. The timestamp is the attempt's, so a retry is signed again and
 * passes receivers that refuse old timestamps (the reference library allows 5 minutes).
 */
export function webhookHeaders(
  secret: string,
  msgId: string,
  nowMs: number,
  body: string,
): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': msgId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(secret, msgId, timestamp, body),
    'user-agent': USER_AGENT,
  };
}
