import { HttpConnection, WeightedConnectionPool } from '@elastic/elasticsearch';
import { PromptConnectionPool } from '../../src/adapters/elasticsearch/client';

const NODES = ['http://127.0.0.1:9201/', 'http://127.0.0.1:9202/', 'http://127.0.0.1:9203/'];
const opts = () => ({ now: Date.now(), requestId: 1, name: 'test', context: null });

type Pool = {
  getConnection(o: ReturnType<typeof opts>): { id: string } | null;
  markDead(c: unknown): unknown;
  markAlive(c: unknown): unknown;
};

/** Every node fails 30 requests in a row, as during a whole-cluster outage. */
function outage(pool: Pool): void {
  for (let i = 0; i < 30; i++) {
    const c = pool.getConnection(opts());
    if (c) pool.markDead(c);
  }
}

const picks = (pool: Pool, n: number) =>
  Array.from({ length: n }, () => pool.getConnection(opts())?.id ?? 'none');

test('the stock pool refuses requests after an outage (elastic/elasticsearch-js#1714: why ours exists)', () => {
  const pool = new WeightedConnectionPool({ Connection: HttpConnection });
  pool.addConnection(NODES);
  outage(pool as unknown as Pool);
  expect(picks(pool as unknown as Pool, 100)).toContain('none');
});

test('after every node failed, every request still goes to some node', () => {
  const pool = new PromptConnectionPool({ Connection: HttpConnection });
  pool.addConnection(NODES);
  outage(pool as unknown as Pool);
  expect(picks(pool as unknown as Pool, 100)).not.toContain('none');
  // while none is known alive, the transport's selector may pick any of them
  let offered = 0;
  pool.getConnection({
    ...opts(),
    selector: (cs) => {
      offered = cs.length;
      return cs[0]!;
    },
  });
  expect(offered).toBe(3);
});

test('once one node answers, the others are tried again within 16 s', () => {
  const pool = new PromptConnectionPool({ Connection: HttpConnection });
  pool.addConnection(NODES);
  outage(pool as unknown as Pool);
  const first = pool.connections[0]!;
  pool.markAlive(first);
  expect(new Set(picks(pool as unknown as Pool, 20))).toEqual(new Set([first.id]));
  for (const c of pool.connections.slice(1))
    expect(c.resurrectTimeout - Date.now()).toBeLessThanOrEqual(16_000);
});
