import fc from 'fast-check';
import {
  MAX_DELIVERY_ATTEMPTS,
  RETRY_SCHEDULE_MS,
  nextAttemptAt,
  reachedThresholds,
  retryAfterMs,
  webhookBody,
} from '../../src/domain/webhook';
import { checkWebhookInput } from '../../src/domain/webhook-input';
import { AppError } from '../../src/domain/errors';
import { deliveryId } from '../../src/services/webhook-deliveries';

const T = Date.UTC(2026, 10, 27, 12);
const H = 3_600_000;

describe('the retry schedule (contract §17)', () => {
  test('5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 24 h, then none: 8 attempts in all', () => {
    const mid = () => 0.5; // no jitter
    const waits = Array.from(
      { length: 7 },
      (_, i) => nextAttemptAt(i + 1, T, { random: mid })! - T,
    );
    expect(waits).toEqual([5_000, 300_000, 1_800_000, 2 * H, 5 * H, 10 * H, 24 * H]);
    expect(nextAttemptAt(MAX_DELIVERY_ATTEMPTS, T)).toBeUndefined();
    expect(MAX_DELIVERY_ATTEMPTS).toBe(8);
  });

  test('waits of 5 min and more are jittered by at most 10 %, 5 s is not', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 7 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        (n, r) => {
          const wait = nextAttemptAt(n, T, { random: () => r })! - T;
          const base = RETRY_SCHEDULE_MS[n - 1]!;
          if (base < 300_000) expect(wait).toBe(base);
          else {
            expect(wait).toBeGreaterThanOrEqual(base * 0.9 - 1);
            expect(wait).toBeLessThanOrEqual(base * 1.1 + 1);
          }
        },
      ),
    );
  });

  test('Retry-After only delays; the scale divides the schedule', () => {
    expect(nextAttemptAt(1, T, { retryAfterMs: 60_000 })! - T).toBe(60_000);
    expect(nextAttemptAt(1, T, { retryAfterMs: 1_000 })! - T).toBe(5_000);
    expect(nextAttemptAt(1, T, { scale: 1000 })! - T).toBe(5);
  });

  test('Retry-After as seconds or an HTTP date, capped at 24 h; anything else is ignored', () => {
    expect(retryAfterMs('120', T)).toBe(120_000);
    expect(retryAfterMs(new Date(T + 90_000).toUTCString(), T)).toBe(90_000);
    expect(retryAfterMs(new Date(T - 90_000).toUTCString(), T)).toBe(0);
    expect(retryAfterMs('999999999', T)).toBe(24 * H);
    expect(retryAfterMs(undefined, T)).toBeUndefined();
    expect(retryAfterMs('soon', T)).toBeUndefined();
  });
});

describe('usage thresholds', () => {
  test('80 and 100 % of the limit; a refusal is 100 % even below it', () => {
    expect(reachedThresholds(7.9, 10)).toEqual([]);
    expect(reachedThresholds(8, 10)).toEqual([80]);
    expect(reachedThresholds(10, 10)).toEqual([80, 100]);
    expect(reachedThresholds(9.5, 10, true)).toEqual([80, 100]);
    expect(reachedThresholds(1, 10, true)).toEqual([100]);
    expect(reachedThresholds(0, 0)).toEqual([80, 100]);
  });
});

describe('registration input', () => {
  const details = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      return (e as AppError).details!.map((d) => d.field);
    }
    throw new Error('accepted');
  };

  test('an http(s) URL without credentials, known events, a bounded dataset list', () => {
    expect(
      checkWebhookInput({
        url: 'https://x.example/h',
        events: ['items.failed', 'items.processed'],
      }),
    ).toEqual({ url: 'https://x.example/h', events: ['items.processed', 'items.failed'] });
    expect(
      details(() => checkWebhookInput({ url: 'ftp://x/h', events: ['items.failed'] })),
    ).toEqual(['url']);
    expect(
      details(() => checkWebhookInput({ url: 'https://u:p@x/h', events: ['items.failed'] })),
    ).toEqual(['url']);
    expect(details(() => checkWebhookInput({ url: 'nope', events: [] }))).toEqual([
      'url',
      'events',
    ]);
    expect(
      details(() => checkWebhookInput({ url: 'https://x/h', events: ['items.done'] })),
    ).toEqual(['events[0]']);
    expect(
      details(() =>
        checkWebhookInput({ url: 'https://x/h', events: ['items.failed'], datasets: [] }),
      ),
    ).toEqual(['datasets']);
    expect(
      details(() =>
        checkWebhookInput({ url: 'https://x/' + 'a'.repeat(2048), events: ['items.failed'] }),
      ),
    ).toEqual(['url']);
  });
});

describe('bodies and ids', () => {
  test('{ type, timestamp, data: { organisation, … } }', () => {
    expect(
      JSON.parse(webhookBody('acme', T, { type: 'items.processed', dataset: 'shoes', ids: ['a'] })),
    ).toEqual({
      type: 'items.processed',
      timestamp: new Date(T).toISOString(),
      data: { organisation: 'acme', dataset: 'shoes', ids: ['a'] },
    });
    const usage = JSON.parse(
      webhookBody('acme', T, {
        type: 'usage.threshold',
        kind: 'credits',
        percent: 80,
        used: 8,
        limit: 10,
      }),
    );
    expect(usage.data).toEqual({
      organisation: 'acme',
      kind: 'credits',
      percent: 80,
      used: 8,
      limit: 10,
    });
  });

  test('delivery ids are deterministic, msg_-prefixed and never hold a dot', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string(), fc.integer())), (parts) => {
        const id = deliveryId(...parts);
        expect(id).toBe(deliveryId(...parts));
        expect(id).toMatch(/^msg_[A-Za-z0-9]{27}$/);
      }),
    );
    expect(deliveryId('a', 1)).not.toBe(deliveryId('a', 2));
  });
});
