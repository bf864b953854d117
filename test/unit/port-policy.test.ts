/**
 * The port decorator every stateful port goes through (src/adapters/port-policy.ts): an engine
 * outage answers 503 with Retry-After, anything else passes unchanged, a synchronous throw is a
 * rejection, and every call is timed under its port.
 */
import { errors } from '@elastic/elasticsearch';
import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDb, sqliteOutage } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { toUnavailable } from '../../src/adapters/elasticsearch/outage';
import { withPolicy } from '../../src/adapters/port-policy';
import { AppError } from '../../src/domain/errors';
import { Metrics } from '../../src/observability/metrics';

class Adapter {
  calls = 0;
  onEvent?: () => void;
  constructor(private readonly fail?: unknown) {}

  async read(x: number): Promise<number> {
    this.calls++;
    if (this.fail) throw this.fail;
    return x * 2;
  }

  /** Calls its own method: the policy is applied once, at the port. */
  async twice(x: number): Promise<number> {
    return (await this.read(x)) + (await this.read(x));
  }

  syncThrow(): Promise<void> {
    throw this.fail;
  }

  fire(): void {
    this.onEvent?.();
  }
}

const unreachable = () => new errors.ConnectionError('connect ECONNREFUSED 10.0.0.7:9200');
const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

describe('withPolicy', () => {
  test.each([
    ['Elasticsearch', toUnavailable, unreachable()],
    ['SQLite', sqliteOutage, busy()],
  ])('an outage of %s is a 503 with Retry-After that keeps its cause', async (_, classify, e) => {
    const port = withPolicy(new Adapter(e), { classify });
    const err = (await port.read(1).catch((x: unknown) => x)) as AppError;
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'unavailable', status: 503, retryAfter: 5 });
    expect(err.cause).toBe(e);
  });

  test('any other error passes unchanged, the same object', async () => {
    for (const e of [new Error('a bug'), new AppError('not_found', 'dataset not found')]) {
      for (const classify of [toUnavailable, sqliteOutage]) {
        const port = withPolicy(new Adapter(e), { classify });
        await expect(port.read(1)).rejects.toBe(e);
      }
    }
  });

  test('a synchronous throw is answered as a rejection, classified the same way', async () => {
    const outage = withPolicy(new Adapter(busy()), { classify: sqliteOutage });
    let answer: Promise<void> | undefined;
    expect(() => (answer = outage.syncThrow())).not.toThrow();
    await expect(answer).rejects.toMatchObject({ code: 'unavailable', retryAfter: 5 });

    const bug = new TypeError('x is undefined');
    const other = withPolicy(new Adapter(bug), { classify: sqliteOutage });
    await expect(other.syncThrow()).rejects.toBe(bug);
  });

  test('every call is timed under its port and operation, failed ones too', async () => {
    const metrics = new Metrics();
    const ok = withPolicy(new Adapter(), {
      classify: sqliteOutage,
      time: metrics.portTimer('accounts'),
    });
    const down = withPolicy(new Adapter(busy()), {
      classify: sqliteOutage,
      time: metrics.portTimer('accounts'),
    });
    const engine = withPolicy(new Adapter(), {
      classify: sqliteOutage,
      time: metrics.portTimer('engine'),
    });
    expect(await ok.twice(2)).toBe(8);
    await ok.read(1);
    await down.read(1).catch(() => undefined);
    await engine.read(1);
    const text = await metrics.registry.metrics();
    // twice's own calls of read are the adapter's business: not timed again
    expect(text).toMatch(
      /port_request_duration_seconds_count\{port="accounts",operation="twice"\} 1\n/,
    );
    expect(text).toMatch(
      /port_request_duration_seconds_count\{port="accounts",operation="read"\} 2\n/,
    );
    // the search engine keeps the histogram the dashboard reads
    expect(text).toMatch(/search_engine_request_duration_seconds_count\{operation="read"\} 1\n/);
    expect(text).not.toMatch(/port="engine"/);
  });

  test('the port is still the adapter: its name, its state, its properties, a spy', async () => {
    const adapter = new Adapter();
    const port = withPolicy(adapter, { classify: toUnavailable });
    expect(port).toBeInstanceOf(Adapter);
    expect(port.constructor.name).toBe('Adapter');
    await port.read(1);
    expect(port.calls).toBe(1);
    // a property assigned through the port (the queue's onRecovered) reaches the adapter
    const seen = jest.fn();
    port.onEvent = seen;
    adapter.fire();
    expect(seen).toHaveBeenCalledTimes(1);
    jest.spyOn(port, 'read').mockResolvedValue(42);
    expect(await port.read(1)).toBe(42);
    expect(await adapter.read(1)).toBe(2);
  });
});

describe('embeddedPorts', () => {
  test('a database file that cannot be written answers every port 503, not 500', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-policy-'));
    const file = path.join(dir, 'store.db');
    openDb(file).close();
    const db = new Database(file, { readonly: true });
    try {
      const ports = embeddedPorts(db, dir);
      const plan = { kind: 'free' } as never;
      const writes = [
        ports.accounts.createOrg({ name: 'acme', plan, createdAt: '2026-01-01T00:00:00Z' }),
        ports.content.applyWrites('d', [{ id: 'a', url: 'http://img.test/a.png' }], 'post', 1),
        ports.ledger.charge({ org: 'acme', datasetId: 'd', type: 'search', micro: 1, at: 1 }, 10),
        ports.events.append([{ org: 'acme', datasetId: 'd', kind: 'track', type: 'x', at: 1 }]),
      ];
      for (const w of writes)
        await expect(w).rejects.toMatchObject({ code: 'unavailable', retryAfter: 5 });
    } finally {
      db.close();
    }
  });
});
