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
  const enqueued: ProcessingJob[][] = [];
  const store = {
    pendingJobs: async () => {
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
  const settle = () => new Promise((res) => setTimeout(res, 20));
  return { r, queue, enqueued, setDown: (d: boolean) => (down = d), settle };
}

describe('recovery sweeps', () => {
  test('the end of an outage sweeps again, even right after the start-up sweep', async () => {
    const { r, queue, enqueued, settle } = setup();
    await r.sweep();
    queue.onRecovered!();
    await settle();
    expect(enqueued).toHaveLength(2);
    r.stop();
  });

  test('a sweep retried successfully just now covers the end of the outage: no second sweep', async () => {
    const { r, queue, enqueued, setDown, settle } = setup();
    setDown(true);
    await r.sweep(); // fails during the outage (and would be retried in 5 s)
    setDown(false);
    await r.sweep(); // the retry succeeds
    queue.onRecovered!();
    await settle();
    expect(enqueued).toHaveLength(1);
    r.stop();
  });
});
