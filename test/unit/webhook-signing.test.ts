import crypto from 'node:crypto';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { signWebhook, webhookHeaders, webhookSecret } from '../../src/services/webhook-signing';

const serverKey = crypto.randomBytes(32);
const body =
  '{"type":"items.processed","timestamp":"2026-11-27T01:00:00.000Z","data":{"ids":["a"]}}';
const msgId = 'msg_01JDQ8Z6Y0P3V9K2M4N7R5T8W1';

describe('webhookSecret', () => {
  it('is whsec_ and the base64 of 32 bytes', () => {
    const secret = webhookSecret(serverKey, 'wh_1', 'salt');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
  });

  it('is derived: the same inputs give the same secret, any other input another', () => {
    const secret = webhookSecret(serverKey, 'wh_1', 'salt');
    expect(webhookSecret(Buffer.from(serverKey), 'wh_1', 'salt')).toBe(secret);
    expect(webhookSecret(serverKey, 'wh_2', 'salt')).not.toBe(secret);
    expect(webhookSecret(serverKey, 'wh_1', 'salt2')).not.toBe(secret);
    expect(webhookSecret(crypto.randomBytes(32), 'wh_1', 'salt')).not.toBe(secret);
  });

  it('is the HMAC-SHA256 of the server key over its own label', () => {
    const expected = crypto.createHmac('sha256', serverKey).update('webhook:wh_1:s').digest();
    expect(webhookSecret(serverKey, 'wh_1', 's')).toBe(`whsec_${expected.toString('base64')}`);
  });
});

describe('signWebhook', () => {
  it('matches the reference library’s fixed example', () => {
    // The vector of standard-webhooks' JavaScript library tests ("sign function works"): the
    // spec text itself gives no secret with its example.
    expect(
      signWebhook(
        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        'msg_p5jXN8AQM9LWM0D4loKWxJek',
        1614265330,
        '{"test": 2432232314}',
      ),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('agrees with the reference library’s sign', () => {
    const secret = webhookSecret(serverKey, 'wh_1', 'salt');
    expect(signWebhook(secret, msgId, 1_700_000_000, body)).toBe(
      new Webhook(secret).sign(msgId, new Date(1_700_000_000_000), body),
    );
  });
});

describe('webhookHeaders', () => {
  const secret = webhookSecret(serverKey, 'wh_1', 'salt');

  it('carries the content type, id, timestamp in seconds, signature and user agent', () => {
    const h = webhookHeaders(secret, msgId, 1_700_000_000_999, body);
    expect(h['content-type']).toBe('application/json');
    expect(h['webhook-id']).toBe(msgId);
    expect(h['webhook-timestamp']).toBe('1700000000');
    expect(h['webhook-signature']).toBe(signWebhook(secret, msgId, 1_700_000_000, body));
    expect(h['user-agent']).toEqual(expect.any(String));
  });

  it('verifies with standardwebhooks', () => {
    const h = webhookHeaders(secret, msgId, Date.now(), body);
    expect(new Webhook(secret).verify(body, h)).toEqual(JSON.parse(body));
  });

  it('fails verification when the body, id, timestamp or secret is changed', () => {
    const now = Date.now();
    const h = webhookHeaders(secret, msgId, now, body);
    const wh = new Webhook(secret);
    expect(() => wh.verify(body.replace('"a"', '"b"'), h)).toThrow();
    expect(() => wh.verify(body, { ...h, 'webhook-id': `${msgId}x` })).toThrow();
    expect(() =>
      wh.verify(body, { ...h, 'webhook-timestamp': String(Math.floor(now / 1000) + 1) }),
    ).toThrow();
    expect(() => new Webhook(webhookSecret(serverKey, 'wh_2', 'salt')).verify(body, h)).toThrow();
  });

  it('a retry signed again with its own time passes where the first attempt’s headers no longer do', () => {
    const first = webhookHeaders(secret, msgId, Date.now() - 6 * 60_000, body);
    expect(() => new Webhook(secret).verify(body, first)).toThrow(/timestamp/i);
    const retry = webhookHeaders(secret, msgId, Date.now(), body);
    expect(retry['webhook-id']).toBe(first['webhook-id']);
    expect(new Webhook(secret).verify(body, retry)).toEqual(JSON.parse(body));
  });

  it('any id, time and body round-trip through standardwebhooks', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 24, maxLength: 64 }),
        fc.stringMatching(/^msg_[0-9A-Za-z_-]{1,40}$/),
        fc.integer({ min: -240, max: 240 }),
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        (key, id, skewS, payload) => {
          const s = `whsec_${Buffer.from(key).toString('base64')}`;
          const h = webhookHeaders(s, id, Date.now() + skewS * 1000, payload);
          new Webhook(s).verify(payload, h, { jsonParse: false });
          const other = payload.length > 0 ? payload.slice(1) : 'x';
          expect(() => new Webhook(s).verify(other, h, { jsonParse: false })).toThrow();
        },
      ),
    );
  });
});
