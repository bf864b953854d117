/**
 * A worker stores each processed item with its dataset's active projection (contract §20), so
 * that on Elasticsearch the item ranks in the one kNN by the blend at once rather than waiting
 * for the tuning pass; a projection it cannot read leaves that to the pass, never the job.
 */
import type { ProcessingJob } from '../../src/domain/item';
import type { Projection } from '../../src/domain/tuning/lda';
import type { ActiveProjection } from '../../src/ports/search-engine';
import { TunedModels, activeProjections } from '../../src/services/tuned-models';
import { serialise } from '../../src/domain/tuning/lda';
import { FEATURES, imageJobHandler } from '../helpers/image-job';

const job = {
  datasetId: 'd1',
  itemId: 'i1',
  url: 'http://images.example/a.png',
  attempt: 1,
} as ProcessingJob;
const projection: Projection = {
  dims: 1,
  k: 1,
  mean: Float32Array.of(0),
  basis: Float32Array.of(1),
};

async function stored(tuning?: () => Promise<ActiveProjection | undefined>) {
  const calls: unknown[][] = [];
  const handler = imageJobHandler({
    store: {
      getItems: async () => [{ id: 'i1', url: job.url, state: 'pending', updatedAt: 1 }],
      markProcessed: async (...args: unknown[]) => {
        calls.push(args);
        return true;
      },
    } as never,
    fetcher: { fetch: async () => Buffer.from('png') } as never,
    ledger: { recordImage: async () => undefined } as never,
    ...(tuning ? { tuning } : {}),
  });
  await handler.handle(job);
  expect(calls).toHaveLength(1);
  expect(calls[0]![1]).toEqual(FEATURES);
  return calls[0]![3];
}

test('a processed item is stored with the projection the dataset ranks by', async () => {
  const active = { model: 'm1', projection };
  expect(await stored(async () => active)).toBe(active);
  expect(await stored(async () => undefined)).toBeUndefined();
});

test('a projection that cannot be read leaves the item to the pass, not the job to a retry', async () => {
  expect(
    await stored(async () => {
      throw new Error('store down');
    }),
  ).toBeUndefined();
});

describe('activeProjections', () => {
  const dataset = (state: string, embedder = 'e1') => ({
    id: 'd1',
    org: 'o1',
    embedder: { id: 'e1', dimensions: 1 },
    similarity: { learnFrom: 'c', weight: 0.75, revision: 1, state, model: 'm1', embedder },
  });
  const models = new TunedModels({ getModel: async () => serialise(projection) });

  test('is the active projection of the dataset, and none when tuning is not active', async () => {
    for (const [ds, want] of [
      [dataset('active'), 'm1'],
      [dataset('fitting'), undefined],
      [dataset('active', 'e0'), undefined],
      [undefined, undefined],
    ] as const) {
      const of = activeProjections({ getDatasetById: async () => ds as never }, models, Date.now);
      expect((await of('d1'))?.model).toBe(want);
    }
  });

  test('reads the record once a second at most, and again after', async () => {
    let reads = 0;
    let t = 0;
    const of = activeProjections(
      {
        getDatasetById: async () => {
          reads++;
          return dataset('active') as never;
        },
      },
      models,
      () => t,
    );
    await Promise.all([of('d1'), of('d1')]);
    t = 400;
    await of('d1');
    expect(reads).toBe(1);
    t = 1000;
    await of('d1');
    expect(reads).toBe(2);
  });
});
