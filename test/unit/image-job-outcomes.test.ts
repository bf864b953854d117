/**
 * image_jobs_total counts every job the queue runs again, whatever threw: a store that stops
 * answering before the download is `retried` as much as a 503 from the image host; a job the
 * queue parks as dead is `failed`; a fair-share deferral has not run and is not counted.
 */
import { AppError } from '../../src/domain/errors';
import type { ProcessingJob } from '../../src/domain/item';
import { FairShare } from '../../src/jobs/fair-share';
import { Slots } from '../../src/lib/slots';
import { Metrics } from '../../src/observability/metrics';
import { imageJobHandler } from '../helpers/image-job';
import { MAX_UNEXPECTED_ATTEMPTS } from '../../src/domain/retry-rule';

const job = (attempt: number): ProcessingJob =>
  ({ datasetId: 'd1', itemId: 'i1', url: 'http://images.example/a.png', attempt }) as ProcessingJob;

async function outcomes(fail: () => Error, attempt = 1): Promise<Record<string, number>> {
  const metrics = new Metrics();
  const handler = imageJobHandler({
    store: {
      getItems: async () => {
        throw fail();
      },
    } as never,
    fair: new FairShare(2),
    imageSlots: new Slots(2),
    metrics,
  });
  await expect(handler.handle(job(attempt))).rejects.toBeInstanceOf(Error);
  const counted = await metrics.imageJobs.get();
  return Object.fromEntries(counted.values.map((v) => [String(v.labels.outcome), v.value]));
}

test('a store that is unavailable before the download counts as retried', async () => {
  expect(await outcomes(() => new AppError('unavailable', 'store down'))).toEqual({ retried: 1 });
});

test('an unexpected error counts as retried, and as failed once the queue parks the job', async () => {
  expect(await outcomes(() => new Error('bug'))).toEqual({ retried: 1 });
  expect(await outcomes(() => new Error('bug'), MAX_UNEXPECTED_ATTEMPTS)).toEqual({ failed: 1 });
});
