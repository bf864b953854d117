import pino from 'pino';
import { startRecovery } from '../../src/jobs/recovery';
import type { ProcessingJob } from '../../src/domain/item';
import type { ContentStore } from '../../src/ports/content-store';
import type { JobQueue } from '../../src/ports/job-queue';

const job: ProcessingJob = {
  datasetId: 'd',
  itemId: 'a',
  url: 'http://img.test/a.png',
  attempt: 1,
};

function setup() {
  let down = false;
  let reads = 0;
  const enqueued: ProcessingJob[][] = [];
  const store = {
    pendingJobs: async () => {
      reads++;
      if (down) throw new Error('store down');
      return { jobs: [job] };
    },
    staleEmbeddings: async () => ({ jobs: [] }),
  } as unknown as ContentStore;
  const queue = {
    enqueue: async (jobs: ProcessingJob[]) => {
      if (jobs.length) enqueued.push(jobs);
    },
    stats: async () => ({ ready: 1, delayed: 0, running: 0, dead: 0 }),
  } as unknown as JobQueue;
  const r = startRecovery(store, queue, pino({ level: 'silent' }), 'emb');
  /** Sweeps begun: a sweep reads the store as it begins, before `sweep()` returns. */
  const sweeps = () => reads;
  return { r, queue, enqueued, setDown: (d: boolean) => (down = d), sweeps };
}

describe('recovery sweeps', () => {
  test('the end of an outage sweeps again, even right after the start-up sweep', async () => {
    const { r, queue, enqueued, sweeps } = setup();
    await r.sweep();
    queue.onRecovered!();
    expect(sweeps()).toBe(2);
    await r.sweep(); // joins the sweep in flight, so it returns when that one is done
    expect(sweeps()).toBe(2);
    expect(enqueued).toHaveLength(2);
    r.stop();
  });

  test('a sweep retried successfully just now covers the end of the outage: no second sweep', async () => {
    const { r, queue, enqueued, setDown, sweeps } = setup();
    setDown(true);
    await r.sweep(); // fails during the outage (and would be retried in 5 s)
    setDown(false);
    await r.sweep(); // the retry succeeds
    queue.onRecovered!();
    expect(sweeps()).toBe(2); // a sweep it began would have read the store already
    expect(enqueued).toHaveLength(1);
    r.stop();
  });
});
