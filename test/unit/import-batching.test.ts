import {
  Batcher,
  bodyBytes,
  requestBody,
  type Batch,
  type Entry,
} from '../../src/cli/import/batcher';
import { backoffDelay, DEFAULT_RETRY, parseRetryAfter } from '../../src/cli/import/client';
import { badItems } from '../../src/cli/import/importer';
import { LIMITS } from '../../src/domain/limits';

/** Entries of one line each, laid end to end from byte 0. */
function entries(
  n: number,
  make: (i: number) => Partial<Entry> & object,
  lineBytes = 100,
): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    line: i + 1,
    start: i * lineBytes,
    end: (i + 1) * lineBytes,
    nextLine: i + 2,
    ...make(i),
  })) as Entry[];
}

function batchAll(b: Batcher, es: Entry[]): Batch[] {
  const out: Batch[] = [];
  for (const e of es) {
    const closed = b.add(e);
    if (closed) out.push(closed);
  }
  const last = b.flush();
  if (last) out.push(last);
  return out;
}

const item = (i: number, pad = 0) => ({
  item: { id: `sku-${i}`, url: `http://img/${i}.png`, metadata: { name: 'é'.repeat(pad) } },
});

describe('batching within the content body limit', () => {
  it('keeps every body within the byte limit and counts bytes exactly (UTF-8)', () => {
    const maxBytes = 10_000;
    const es = entries(500, (i) => item(i, (i * 37) % 300));
    const batches = batchAll(new Batcher({ maxBytes, maxItems: 1_000_000 }, 0, 1), es);
    expect(batches.length).toBeGreaterThan(5);
    for (const b of batches) {
      const body = requestBody(b.items);
      expect(Buffer.byteLength(body)).toBe(bodyBytes(b.items.map((i) => i.bytes)));
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(maxBytes);
      expect(JSON.parse(body).content).toHaveLength(b.items.length);
    }
    // full: the next item would not have fitted
    for (let k = 0; k < batches.length - 1; k++) {
      const next = batches[k + 1].items[0].bytes;
      expect(bodyBytes([...batches[k].items.map((i) => i.bytes), next])).toBeGreaterThan(maxBytes);
    }
    expect(batches.flatMap((b) => b.items.map((i) => i.line))).toEqual(es.map((e) => e.line));
  });

  it('defaults to the interface limit, 5 MB', () => {
    const es = entries(300, (i) => item(i, 10_000)); // ~20 KB each: ~6 MB in all
    const batches = batchAll(
      new Batcher({ maxBytes: LIMITS.requestBodyBytes, maxItems: 1000 }, 0, 1),
      es,
    );
    expect(batches).toHaveLength(2);
    for (const b of batches)
      expect(Buffer.byteLength(requestBody(b.items))).toBeLessThanOrEqual(LIMITS.requestBodyBytes);
  });

  it('caps the items of a batch', () => {
    const batches = batchAll(new Batcher({ maxBytes: 1e9, maxItems: 7 }, 0, 1), entries(20, item));
    expect(batches.map((b) => b.items.length)).toEqual([7, 7, 6]);
  });

  it('covers contiguous byte ranges, rejected lines included, so acknowledging is in order', () => {
    const es = entries(30, (i) =>
      i % 4 === 3 ? { reason: 'missing url', id: `sku-${i}` } : item(i),
    );
    const batches = batchAll(new Batcher({ maxBytes: 1e9, maxItems: 5 }, 0, 1), es);
    let at = 0;
    let line = 1;
    for (const b of batches) {
      expect(b.start).toBe(at);
      expect(b.end).toBeGreaterThan(b.start);
      at = b.end;
      line = b.nextLine;
    }
    expect(at).toBe(3000);
    expect(line).toBe(31);
    expect(batches.flatMap((b) => b.rejected.map((r) => r.line))).toEqual([
      4, 8, 12, 16, 20, 24, 28,
    ]);
    expect(batches[0].rejected[0]).toEqual({
      line: 4,
      id: 'sku-3',
      reason: 'missing url',
      by: 'local',
    });
  });

  it('starts at the resume offset and line', () => {
    const b = new Batcher({ maxBytes: 1e9, maxItems: 2 }, 5000, 51);
    const e: Entry = { line: 51, start: 5000, end: 5100, nextLine: 52, ...item(1) };
    expect(b.add(e)).toBeUndefined();
    expect(b.flush()).toMatchObject({ start: 5000, end: 5100, nextLine: 52 });
  });

  it('rejects an item that cannot fit in any body, and flushes a batch of rejections only', () => {
    const b = new Batcher({ maxBytes: 500, maxItems: 10 }, 0, 1);
    const [big] = entries(1, () => item(0, 400));
    expect(b.add(big)).toBeUndefined();
    const last = b.flush()!;
    expect(last.items).toHaveLength(0);
    expect(last.rejected[0].reason).toMatch(/a request body holds at most 500/);
    expect(last.end).toBe(100);
    expect(b.flush()).toBeUndefined();
  });
});

describe('a 400 names the bad items', () => {
  const group = ['a', 'b', 'c'].map((id, i) => ({ line: i + 1, id, json: '{}', bytes: 2 }));

  it('by index, several details per item, ignoring indexes out of range', () => {
    const bad = badItems(group, [
      { index: 2, id: 'c', field: 'url', message: 'bad url' },
      { index: 2, id: 'c', field: 'metadata.x', message: 'nested' },
      { index: 9, message: 'nonsense' },
    ]);
    expect([...bad.keys()]).toEqual([2]);
    expect(bad.get(2)).toHaveLength(2);
  });

  it('by id when there is no index', () => {
    expect([...badItems(group, [{ id: 'b', message: 'x' }]).keys()]).toEqual([1]);
    expect(badItems(group, [{ param: 'content', message: 'x' } as never]).size).toBe(0);
  });
});

describe('retry timing', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter('Wed, 01 Jan 2025 00:00:10 GMT', now)).toBe(10_000);
  });

  it('backs off exponentially with jitter, capped', () => {
    const p = DEFAULT_RETRY;
    for (let a = 0; a < 12; a++) {
      const exp = Math.min(p.maxMs, p.baseMs * 2 ** a);
      expect(backoffDelay(a, undefined, p, () => 0)).toBe(exp / 2);
      expect(backoffDelay(a, undefined, p, () => 0.999999)).toBeCloseTo(exp, -1);
    }
  });

  it('never waits less than Retry-After (capped to the policy maximum)', () => {
    const p = DEFAULT_RETRY;
    expect(backoffDelay(0, 5000, p, () => 0)).toBe(5000);
    expect(backoffDelay(0, 5000, p, () => 0.5)).toBeGreaterThan(5000);
    expect(backoffDelay(0, 3_600_000, p, () => 0)).toBe(p.maxRetryAfterMs);
  });
});
