/**
 * A client write is answered only once it is searchable (contract §4). Elasticsearch answers a
 * refresh with 200 even when a copy of the index failed to refresh; that must not pass for
 * visible. The installation's own client (esClient, with WholeAnswerTransport) talks here to a
 * stand-in node over HTTP, because a real single node cannot be made to fail one copy's refresh.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '../../src/domain/errors';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { Refresher } from '../../src/adapters/elasticsearch/refresher';

type Shards = { total: number; successful: number; failed: number };

/** A node answering every request with `_shards`; it records the paths and query strings. */
async function node(shards: Shards) {
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    asked.push(req.url ?? '');
    req.resume().on('end', () => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-elastic-product': 'Elasticsearch',
      });
      res.end(JSON.stringify({ _shards: shards, count: 0, hits: { hits: [] } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = esClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return {
    client,
    asked,
    close: async () => {
      await client.close();
      await new Promise((r) => server.close(r));
    },
  };
}

test('a write is visible once every copy of its index refreshed', async () => {
  const n = await node({ total: 2, successful: 2, failed: 0 });
  try {
    await new Refresher(() => n.client, 0).visible('items-d1');
    expect(n.asked.map((u) => u.split('?')[0])).toEqual(['/items-d1/_refresh']);
  } finally {
    await n.close();
  }
});

test('a copy that failed to refresh answers a retryable 503 naming the index, not success', async () => {
  const n = await node({ total: 2, successful: 1, failed: 1 });
  try {
    const err = await new Refresher(() => n.client, 0).visible('items-d1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'unavailable', status: 503, retryAfter: 1 });
    expect((err as Error).message).toMatch(/1 of 2 copies of items-d1/);
    // every refresh through the client, not only the Refresher's (the image counts' one too)
    await expect(n.client.indices.refresh({ index: 'images' })).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringMatching(/1 of 2 copies of images/),
    });
  } finally {
    await n.close();
  }
});

test('a search is sent whole-or-nothing, and a count missing a shard is a 503', async () => {
  const n = await node({ total: 2, successful: 1, failed: 1 });
  try {
    await expect(n.client.count({ index: 'items-d1' })).rejects.toMatchObject({
      code: 'unavailable',
      status: 503,
    });
    await n.client.search({ index: 'items-d1' }).catch(() => undefined);
    expect(n.asked.at(-1)).toMatch(/^\/items-d1\/_search\?.*allow_partial_search_results=false/);
  } finally {
    await n.close();
  }
});
