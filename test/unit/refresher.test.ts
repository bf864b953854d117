/**
 * A client write is answered only once it is searchable (contract §4). Elasticsearch answers a
 * refresh with 200 even when a copy of the index failed to refresh; that must not pass for
 * visible.
 */
import type { Client } from '@elastic/elasticsearch';
import { AppError } from '../../src/domain/errors';
import { Refresher } from '../../src/adapters/elasticsearch/refresher';

function client(shards: { total: number; successful: number; failed: number }) {
  const asked: string[] = [];
  const c = {
    indices: {
      refresh: async ({ index }: { index: string }) => {
        asked.push(index);
        return { _shards: shards };
      },
    },
  } as unknown as Client;
  return { c, asked };
}

test('a write is visible once every copy of its index refreshed', async () => {
  const { c, asked } = client({ total: 2, successful: 2, failed: 0 });
  await new Refresher(() => c, 0).visible('items-d1');
  expect(asked).toEqual(['items-d1']);
});

test('a copy that failed to refresh answers a retryable 503 naming the index, not success', async () => {
  const { c } = client({ total: 2, successful: 1, failed: 1 });
  const err = await new Refresher(() => c, 0).visible('items-d1').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(AppError);
  expect(err).toMatchObject({ code: 'unavailable', status: 503, retryAfter: 1 });
  expect((err as Error).message).toMatch(/1 of 2 copies of items-d1/);
});
