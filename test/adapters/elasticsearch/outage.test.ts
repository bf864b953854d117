/**
 * An engine that cannot be reached answers 503 with Retry-After on every port, built as the
 * composition root builds them (esPorts): the outage policy is applied once per port, not per
 * method, so this proves each port has it. (The embedded side: test/unit/port-policy.test.ts.)
 */
import { Client } from '@elastic/elasticsearch';
import net from 'node:net';
import { esPorts } from '../../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../../src/adapters/elasticsearch/indices';

/** A local port nothing listens on: every connection is refused at once. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('every port of an unreachable Elasticsearch answers 503 with Retry-After, never 500', async () => {
  // no retries: the client would wait about 4 s per call before it gave up
  const client = new Client({ node: `http://127.0.0.1:${await closedPort()}`, maxRetries: 0 });
  try {
    const ports = esPorts(new EsIndices(client, 'unreachable-', { shards: 1, replicas: 0 }), {
      vectorDims: 8,
    });
    const search = { conditions: [], sort: { field: 'id', order: 'asc' as const } };
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['accounts', () => ports.accounts.getOrg('acme')],
      ['content', () => ports.content.getItems('d', ['a'])],
      ['engine', () => ports.engine.search('d', { ...search, offset: 0, limit: 5 })],
      ['ledger', () => ports.ledger.month('acme', 2026, 1)],
      ['events', () => ports.events.list('d', { from: 0, to: 1 }, 10)],
      ['keys', () => ports.keys.serverKey()],
      ['rates', () => ports.rates.take('st:d:k', 5, 0)],
      ['webhooks', () => ports.webhooks.list('acme')],
      ['outbox', () => ports.outbox.due(0, 10, ['wh_1'])],
      [
        'outbox facts',
        () =>
          ports.outbox.recordFacts([
            { id: 'f', org: 'acme', datasetId: 'd', kind: 'processed', itemId: 'a', at: 0 },
          ]),
      ],
    ];
    for (const [port, call] of calls) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect([port, err]).toEqual([
        port,
        expect.objectContaining({ code: 'unavailable', status: 503, retryAfter: 5 }),
      ]);
    }
  } finally {
    await client.close();
  }
});
