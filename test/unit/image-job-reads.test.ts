/**
 * What a worker reads per image: its organisation's plan at most once a second (it was one
 * Elasticsearch round trip per image), still seeing a changed limit after that; and whether the
 * image held a place in a fixed allowance, so the ledger frees only places that were taken.
 */
import type { ProcessingJob } from '../../src/domain/item';
import { PLAN_TTL_MS, type Allowance } from '../../src/domain/plan';
import type { ImageCount } from '../../src/ports/usage-ledger';
import { imageJobHandler } from '../helpers/image-job';

function worker(images: () => Allowance, reserve: (limit: number) => boolean = () => true) {
  let reserves = 0;
  let now = 1_000_000;
  const planReads: number[] = [];
  const counted: ImageCount[] = [];
  const postponed: string[] = [];
  const jobOf = (n: number): ProcessingJob => ({
    datasetId: 'd1',
    itemId: `i${n}`,
    url: `http://images.example/${n}.png`,
    attempt: 1,
  });
  const accounts = {
    getDatasetById: async () => ({ org: 'o1' }),
    getOrg: async () => {
      planReads.push(now);
      return { name: 'o1', plan: { images: images() } };
    },
  } as never;
  const handler = imageJobHandler({
    store: {
      getItems: async (_d: string, [id]: string[]) => [
        { id, url: `http://images.example/${id!.slice(1)}.png`, state: 'pending' },
      ],
      markProcessed: async () => true,
      markPostponed: async (j: ProcessingJob) => void postponed.push(j.itemId),
    } as never,
    accounts,
    ledger: {
      reserveImage: async (_e: unknown, limit: number) => {
        reserves++;
        return reserve(limit);
      },
      recordImage: async (e: ImageCount) => void counted.push(e),
    } as never,
    fetcher: { fetch: async () => Buffer.alloc(1) } as never,
    now: () => now,
  });
  return {
    planReads,
    counted,
    postponed,
    run: (from: number, n: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => handler.handle(jobOf(from + i)))),
    advance: (ms: number) => (now += ms),
    reserves: () => reserves,
  };
}

test("a worker reads its organisation's plan once for a burst of images, and again after PLAN_TTL_MS", async () => {
  let limit: Allowance = { limitType: 'unlimited' };
  const w = worker(() => limit);
  await w.run(0, 20);
  expect(w.planReads).toHaveLength(1);
  limit = { limitType: 'fixed', limit: 5 };
  w.advance(PLAN_TTL_MS + 1);
  await w.run(20, 5);
  expect(w.planReads).toHaveLength(2);
  // the raised limit's images took a place; those before did not
  expect(w.counted.slice(0, 20).every((c) => c.held === false)).toBe(true);
  expect(w.counted.slice(20).every((c) => c.held === true)).toBe(true);
});

test('a limit raised within PLAN_TTL_MS admits the image: a refusal reads the plan again before postponing', async () => {
  let limit = 5;
  const w = worker(
    () => ({ limitType: 'fixed', limit }),
    (l) => l > 5, // five images are counted already
  );
  await w.run(0, 1);
  expect([w.counted.length, w.postponed]).toEqual([0, ['i0']]); // under the limit of 5
  limit = 10; // raised; the sweep queues the item again at once
  await w.run(0, 1);
  expect([w.counted.length, w.postponed]).toEqual([1, ['i0']]);
});

test('a refusal under an unchanged plan is not asked twice (each asks for a count of the year)', async () => {
  const w = worker(
    () => ({ limitType: 'fixed', limit: 5 }),
    () => false,
  );
  await w.run(0, 3);
  expect(w.postponed).toEqual(['i0', 'i1', 'i2']);
  expect(w.reserves()).toBe(3);
});

test("a redelivered job for an image already processed is counted under its dataset's organisation, read once per dataset", async () => {
  const datasetReads: string[] = [];
  const counted: ImageCount[] = [];
  const handler = imageJobHandler({
    accounts: {
      getDatasetById: async (id: string) => {
        datasetReads.push(id);
        return { org: 'o1' };
      },
    } as never,
    store: {
      // processed from this url before a crash lost the count and the acknowledgement
      getItems: async (_d: string, [id]: string[]) => [
        {
          id,
          url: `http://images.example/${id}.png`,
          state: 'processed',
          updatedAt: 5,
          image: { width: 1, height: 1, url: `http://images.example/${id}.png`, processedAt: 4 },
        },
      ],
      getEmbedding: async () => ({ vector: [1], embedder: 'e1' }),
    } as never,
    ledger: { recordImage: async (e: ImageCount) => void counted.push(e) } as never,
  });
  for (const id of ['a', 'b', 'c'])
    await handler.handle({
      datasetId: 'd1',
      itemId: id,
      url: `http://images.example/${id}.png`,
      attempt: 2,
    });
  expect(counted.map((c) => [c.org, c.itemId, c.processedAt, c.at])).toEqual([
    ['o1', 'a', 4, 5],
    ['o1', 'b', 4, 5],
    ['o1', 'c', 4, 5],
  ]);
  expect(datasetReads).toEqual(['d1']);
});
