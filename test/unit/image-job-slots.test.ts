/**
 * A worker's image slots (WORKER_CONCURRENCY) cover the download and the analysis only: a job
 * whose result is still being stored (a grouped write waiting for others) has given its slot to
 * the next job, so store writes never leave the analyser idle.
 */
import pino from 'pino';
import type { ProcessingJob } from '../../src/domain/item';
import { FairShare } from '../../src/jobs/fair-share';
import { ProcessImageHandler } from '../../src/jobs/process-image';
import { Slots } from '../../src/lib/slots';
import { PlanReads } from '../../src/services/plans';

function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

function worker(slots: number) {
  const analysing: string[] = [];
  const writes = new Map<string, ReturnType<typeof gate>>();
  const analyses = new Map<string, ReturnType<typeof gate>>();
  const accounts = {
    getDatasetById: async () => ({ org: 'o1' }),
    getOrg: async () => ({ name: 'o1', plan: { images: { limitType: 'unlimited' } } }),
  } as never;
  const handler = new ProcessImageHandler(
    {
      getItems: async (_d: string, [id]: string[]) => [
        { id, url: `http://images.example/${id}.png`, state: 'pending' },
      ],
      markProcessed: async (j: ProcessingJob) => {
        const g = gate();
        writes.set(j.itemId, g);
        await g.wait;
        return true;
      },
    } as never,
    accounts,
    new PlanReads(accounts, () => Date.now()),
    { recordImage: async () => undefined } as never,
    { fetch: async (url: string) => Buffer.from(url) } as never,
    {
      analyze: async (bytes: Buffer) => {
        const id = /\/(\w+)\.png$/.exec(bytes.toString())![1]!;
        analysing.push(id);
        const g = gate();
        analyses.set(id, g);
        await g.wait;
        return { width: 1, height: 1, format: 'png', vector: [1], embedder: 'e1' };
      },
    } as never,
    pino({ level: 'silent' }),
    () => Date.now(),
    10,
    'e1',
    new FairShare(64),
    new Slots(slots),
  );
  const handle = (id: string) =>
    handler.handle({
      datasetId: 'd1',
      itemId: id,
      url: `http://images.example/${id}.png`,
      attempt: 1,
    });
  return { handle, analysing, writes, analyses };
}

const settle = () => new Promise((r) => setImmediate(r));

test('with one slot, a second image waits while the first is analysed, and starts while its result is stored', async () => {
  const w = worker(1);
  const a = w.handle('a');
  const b = w.handle('b');
  await settle();
  expect(w.analysing).toEqual(['a']);
  w.analyses.get('a')!.open();
  await settle();
  // a's result is being written (its write has not answered): b is analysed meanwhile
  expect(w.writes.has('a')).toBe(true);
  expect(w.analysing).toEqual(['a', 'b']);
  w.analyses.get('b')!.open();
  await settle();
  w.writes.get('a')!.open();
  w.writes.get('b')!.open();
  await Promise.all([a, b]);
});
