/**
 * DatasetEventsService and ProgressNotices over an in-memory bus: when counts are read (not
 * before the engine shows a notice, at most every 250 ms), the publication event, a slow
 * subscriber's bounded queue, and the worker's batching. The bus adapters have their own
 * contract suite (test/contract/event-bus.test.ts).
 */
import pino from 'pino';
import type { DatasetCounts } from '../../src/domain/dataset';
import { ProgressNotices } from '../../src/jobs/progress-notices';
import type { EventBus, ProgressNotice } from '../../src/ports/event-bus';
import type { AuthService } from '../../src/services/auth';
import { DatasetEventsService, type DatasetEventView } from '../../src/services/dataset-events';
import type { Principal } from '../../src/services/principal';
import { waitFor } from '../helpers/app';

const log = pino({ level: 'silent' });
const P: Principal = { kind: 'org', org: 'acme', prefix: 'x' };

function memoryBus(): EventBus & { listeners: number; published: ProgressNotice[] } {
  const subs = new Set<(n: ProgressNotice) => void>();
  const bus = {
    published: [] as ProgressNotice[],
    get listeners() {
      return subs.size;
    },
    async publish(ns: ProgressNotice[]) {
      bus.published.push(...ns);
      for (const n of ns) for (const s of subs) s(n);
    },
    subscribe(on: (n: ProgressNotice) => void) {
      subs.add(on);
      return () => void subs.delete(on);
    },
    async close() {},
  };
  return bus;
}

const auth = {
  adminDataset: async (_p: Principal, org: string, name: string) => ({ id: `${org}/${name}` }),
} as unknown as AuthService;

function rig(lagMs: number, counts: () => DatasetCounts, readEveryMs?: number) {
  const bus = memoryBus();
  const reads: number[] = [];
  const service = new DatasetEventsService(
    auth,
    async () => {
      reads.push(Date.now());
      return counts();
    },
    bus,
    { visibilityLagMs: lagMs, log, readEveryMs },
  );
  const notice = (ids: string[], at = Date.now()): Promise<void> =>
    bus.publish([
      { org: 'acme', datasetId: 'acme/shoes', type: 'items.processed', itemIds: ids, at },
    ]);
  return { bus, reads, service, notice };
}

const pending = (processed: number): DatasetCounts => ({
  items: 300,
  processed,
  pending: 300 - processed,
  errors: 0,
});

async function take(it: AsyncIterator<DatasetEventView>, n: number): Promise<DatasetEventView[]> {
  const out: DatasetEventView[] = [];
  while (out.length < n) out.push((await it.next()).value as DatasetEventView);
  return out;
}

test('counts are read once the engine shows the notice, and then with it', async () => {
  let processed = 0;
  const r = rig(300, () => pending(processed));
  const it = (await r.service.stream(P, 'acme', 'shoes'))[Symbol.asyncIterator]();
  const at = Date.now();
  processed = 2;
  await r.notice(['a', 'b'], at);
  const [e] = await take(it, 1);
  expect(e).toEqual({
    type: 'items.processed',
    itemIds: ['a', 'b'],
    counts: pending(2),
    status: 'pending',
  });
  expect(r.reads.at(-1)!).toBeGreaterThanOrEqual(at + 300);
  await it.return!();
});

test("reads are shared by a dataset's streams and at most every 250 ms", async () => {
  const r = rig(0, () => pending(1));
  const a = (await r.service.stream(P, 'acme', 'shoes'))[Symbol.asyncIterator]();
  const b = (await r.service.stream(P, 'acme', 'shoes'))[Symbol.asyncIterator]();
  const before = r.reads.length; // each stream read its starting status
  const start = Date.now();
  const ids: string[] = [];
  while (Date.now() - start < 600) {
    ids.push(`i${ids.length}`);
    await r.notice([ids.at(-1)!]);
    await new Promise((res) => setTimeout(res, 10));
  }
  const seen = new Set<string>();
  await waitFor('every id on stream a', async () => {
    const e = (await a.next()).value as DatasetEventView;
    e.itemIds.forEach((i) => seen.add(i));
    return seen.size === ids.length;
  });
  const reads = r.reads.slice(before);
  for (let i = 1; i < reads.length; i++)
    expect(reads[i]! - reads[i - 1]!).toBeGreaterThanOrEqual(245);
  expect(reads.length).toBeLessThanOrEqual(Math.ceil((Date.now() - start) / 250) + 1);
  // b got the same events from the same reads
  const onB = new Set<string>();
  await waitFor('every id on stream b', async () => {
    ((await b.next()).value as DatasetEventView).itemIds.forEach((i) => onB.add(i));
    return onB.size === ids.length;
  });
  await a.return!();
  await b.return!();
  expect(r.bus.listeners).toBe(0);
});

test('pending → published adds one DATASET_PUBLISHED after the event that did it', async () => {
  let processed = 199;
  const r = rig(0, () => pending(processed));
  const it = (await r.service.stream(P, 'acme', 'shoes'))[Symbol.asyncIterator]();
  processed = 200;
  await r.notice(['x']);
  const [first, second] = await take(it, 2);
  expect(first).toMatchObject({ type: 'items.processed', itemIds: ['x'], status: 'published' });
  expect(second).toEqual({
    type: 'dataset.published',
    itemIds: [],
    counts: pending(200),
    status: 'published',
  });
  processed = 201;
  await r.notice(['y']);
  const [third] = await take(it, 1);
  expect(third).toMatchObject({ type: 'items.processed', itemIds: ['y'] });
  await it.return!();
});

test('a subscriber that does not read holds at most 100 events, ids merged, none lost', async () => {
  let processed = 0;
  const r = rig(0, () => pending(processed), 1);
  const it = (await r.service.stream(P, 'acme', 'shoes'))[Symbol.asyncIterator]();
  const sent: string[] = [];
  // 150 reads, one id each: more than the queue holds
  for (let i = 0; i < 150; i++) {
    processed = i + 1;
    sent.push(`m${i}`);
    const reads = r.reads.length;
    await r.notice([sent.at(-1)!]);
    // until the read has run and handed its events over
    while (r.reads.length <= reads) await new Promise((res) => setTimeout(res, 1));
    await new Promise((res) => setImmediate(res));
  }
  const queued = (it as unknown as { queue: DatasetEventView[] }).queue;
  expect(queued.length).toBeLessThanOrEqual(100);
  expect(queued.flatMap((e) => e.itemIds)).toEqual(sent);
  expect(queued.at(-1)!.counts.processed).toBe(150);
  await it.return!();
  expect(await it.next()).toEqual({ value: undefined, done: true });
});

test('the worker batches ids per dataset and type: 1,000 at once, the rest after 250 ms', async () => {
  const bus = memoryBus();
  const notices = new ProgressNotices(bus, log);
  const outcome = (i: number, kind: 'processed' | 'failed' = 'processed') => ({
    org: 'acme',
    datasetId: 'ds',
    itemId: `i${i}`,
    url: 'u',
    kind,
    at: 0,
    version: 1,
  });
  for (let i = 0; i < 1000; i++) await notices.record(outcome(i));
  expect(bus.published).toHaveLength(1);
  expect(bus.published[0]!.itemIds).toHaveLength(1000);
  await notices.record(outcome(1000));
  await notices.record(outcome(1001, 'failed'));
  const t0 = Date.now();
  await waitFor('the linger', async () => bus.published.length === 3);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
  expect(bus.published.slice(1).map((n) => [n.type, n.itemIds])).toEqual(
    expect.arrayContaining([
      ['items.processed', ['i1000']],
      ['items.failed', ['i1001']],
    ]),
  );
  // close sends what is collected at once
  await notices.record(outcome(1002));
  await notices.close();
  expect(bus.published.at(-1)!.itemIds).toEqual(['i1002']);
});
