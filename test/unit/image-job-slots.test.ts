/**
 * A worker's image slots (WORKER_CONCURRENCY) cover the reads, the download and the analysis
 * only: a job whose outcome is still being stored (a grouped write waiting for others) has given
 * its slot to the next job, whatever the outcome, so store writes never leave the analyser idle.
 */
import type { ProcessingJob } from '../../src/domain/item';
import { ImageError } from '../../src/domain/processing';
import { FairShare } from '../../src/jobs/fair-share';
import { Slots } from '../../src/lib/slots';
import { Defer } from '../../src/ports/job-queue';
import { FEATURES, imageJobHandler } from '../helpers/image-job';

interface Gate {
  wait: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Every store write waits for its gate, named `<write>:<item>`; so does every analysis. */
function worker(opts: { refuse?: boolean; failing?: string } = {}) {
  const analysing: string[] = [];
  const gates = new Map<string, Gate>();
  const blocked = (name: string): Promise<void> => {
    const g = gate();
    gates.set(name, g);
    return g.wait;
  };
  const write = (kind: string) => async (j: ProcessingJob) => {
    await blocked(`${kind}:${j.itemId}`);
    return true;
  };
  const images = opts.refuse ? { limitType: 'fixed', limit: 1 } : { limitType: 'unlimited' };
  const accounts = {
    getDatasetById: async () => ({ org: 'o1' }),
    getOrg: async () => ({ name: 'o1', plan: { images } }),
  } as never;
  const handler = imageJobHandler({
    store: {
      getItems: async (_d: string, [id]: string[]) => [
        { id, url: `http://images.example/${id}.png`, state: 'pending' },
      ],
      markProcessed: write('processed'),
      markPostponed: write('postponed'),
      markFailed: write('failed'),
    } as never,
    accounts,
    ledger: {
      reserveImage: async () => false,
      recordImage: async () => undefined,
      releaseImage: async () => undefined,
    } as never,
    fetcher: {
      fetch: async (url: string) => {
        if (opts.failing && url.includes(`/${opts.failing}.`))
          throw new ImageError('unsupported_format', 'not an image');
        return Buffer.from(url);
      },
    } as never,
    analyzer: {
      analyze: async (bytes: Buffer) => {
        const id = /\/(\w+)\.png$/.exec(bytes.toString())![1]!;
        analysing.push(id);
        await blocked(`analyse:${id}`);
        return FEATURES;
      },
    } as never,
    imageSlots: new Slots(1),
  });
  const handle = (id: string) =>
    handler.handle({
      datasetId: 'd1',
      itemId: id,
      url: `http://images.example/${id}.png`,
      attempt: 1,
    });
  const open = async (name: string) => {
    await settle();
    gates.get(name)!.open();
  };
  return { handle, analysing, gates, open, handler };
}

const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

test('with one slot, a second image waits while the first is analysed, and starts while its result is stored', async () => {
  const w = worker();
  const a = w.handle('a');
  const b = w.handle('b');
  await settle();
  expect(w.analysing).toEqual(['a']);
  await w.open('analyse:a');
  await settle();
  // a's result is being written (its write has not answered): b is analysed meanwhile
  expect(w.gates.has('processed:a')).toBe(true);
  expect(w.analysing).toEqual(['a', 'b']);
  await w.open('analyse:b');
  await w.open('processed:a');
  await w.open('processed:b');
  await Promise.all([a, b]);
});

test('a failed image gives its slot back before its failure is stored', async () => {
  const w = worker({ failing: 'a' });
  const a = w.handle('a');
  const b = w.handle('b');
  await settle();
  expect(w.gates.has('failed:a')).toBe(true);
  expect(w.analysing).toEqual(['b']);
  await w.open('failed:a');
  await w.open('analyse:b');
  await w.open('processed:b');
  await Promise.all([a, b]);
});

test('a postponed image (its yearly package used up) gives its slot back before the postponement is stored', async () => {
  const w = worker({ refuse: true });
  const a = w.handle('a');
  const b = w.handle('b');
  await settle();
  // both refused: b reached its slot while a's postponement was still being written
  expect(w.gates.has('postponed:a')).toBe(true);
  expect(w.gates.has('postponed:b')).toBe(true);
  await w.open('postponed:a');
  await w.open('postponed:b');
  await Promise.all([a, b]);
  expect(w.analysing).toEqual([]);
});

test('on stop, jobs waiting for a slot go back to the queue at once; the one holding it finishes', async () => {
  const w = worker();
  const a = w.handle('a');
  const b = w.handle('b');
  await settle();
  w.handler.stop();
  await expect(b).rejects.toEqual(new Defer(0));
  await expect(w.handle('c')).rejects.toBeInstanceOf(Defer);
  await w.open('analyse:a');
  await w.open('processed:a');
  await a;
  expect(w.analysing).toEqual(['a']);
});

test("a tenant whose job waits for a slot counts for the fair shares at once: the busy tenant's next job steps aside", async () => {
  const downloads: string[] = [];
  const gates = new Map<string, Gate>();
  const accounts = {
    getDatasetById: async (id: string) => ({ org: id === 'dB' ? 'oB' : 'oA' }),
    getOrg: async (name: string) => ({ name, plan: { images: { limitType: 'unlimited' } } }),
  } as never;
  const handler = imageJobHandler({
    store: {
      getItems: async (d: string, [id]: string[]) => [
        { id, url: `http://${d}-${id}.example/i.png`, state: 'pending' },
      ],
      markProcessed: async () => true,
    } as never,
    accounts,
    ledger: { recordImage: async () => undefined } as never,
    fetcher: {
      fetch: async (url: string) => {
        downloads.push(url);
        const g = gate();
        gates.set(url, g);
        await g.wait;
        return Buffer.alloc(1);
      },
    } as never,
    fair: new FairShare(4),
    imageSlots: new Slots(3),
  });
  const job = (d: string, id: string): ProcessingJob => ({
    datasetId: d,
    itemId: id,
    url: `http://${d}-${id}.example/i.png`,
    attempt: 1,
  });
  // tenant A downloads three images (each from its own host), a fourth of A's waits, then B's
  const a = ['a1', 'a2', 'a3'].map((id) => handler.handle(job('dA', id)));
  await settle();
  const a4 = handler.handle(job('dA', 'a4'));
  const b1 = handler.handle(job('dB', 'b1'));
  await settle();
  expect(downloads).toHaveLength(3);
  gates.get('http://dA-a1.example/i.png')!.open();
  // a4 gets the slot first, but A already holds two downloads, its share beside B: it steps aside
  await expect(a4).rejects.toBeInstanceOf(Defer);
  await settle();
  expect(downloads).toEqual([
    'http://dA-a1.example/i.png',
    'http://dA-a2.example/i.png',
    'http://dA-a3.example/i.png',
    'http://dB-b1.example/i.png',
  ]);
  for (const g of gates.values()) g.open();
  await Promise.all([...a, b1]);
});

test('a worker holds twice as many jobs as it has image slots (the queue prefetch)', () => {
  expect(imageJobHandler({ imageSlots: new Slots(3) }).jobsInHand).toBe(6);
});
