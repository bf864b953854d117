/**
 * One set of cases for every JobQueue adapter: the durable in-process queue (SQLite) and
 * RabbitMQ on the real local broker (started by scripts/services.sh).
 */
import path from 'node:path';
import pino from 'pino';
import { AmqpJobQueue } from '../../src/adapters/queue/rabbitmq/amqp-queue';
import { SqliteJobQueue } from '../../src/adapters/queue/in-process/sqlite-queue';
import type { ProcessingJob } from '../../src/domain/item';
import { AppError } from '../../src/domain/errors';
import { Defer, RetryLater, type JobQueue } from '../../src/ports/job-queue';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const log = pino({ level: 'silent' });
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

interface Adapter {
  /**
   * Opens a queue; calls with the same `place` reach the same stored jobs. `now`: the clock it
   * stamps jobs and reads their ages with.
   */
  open(place: string, now?: () => number): Promise<JobQueue>;
  newPlace(): string;
}

const adapters = tierOf<Adapter>({
  local: [
    'in-process (SQLite)',
    {
      newPlace: () => path.join(tempDir('vss-queue-'), 'queue.db'),
      open: async (file, now = Date.now) => new SqliteJobQueue(file, log, now, 20),
    },
  ],
  services: [
    'RabbitMQ',
    {
      newPlace: () => `test.${Date.now().toString(36)}.${Math.random().toString(36).slice(2)}.`,
      open: async (prefix, now = Date.now) => {
        const q = new AmqpJobQueue(AMQP_URL, prefix, log, 20, now);
        await q.start();
        return q;
      },
    },
  ],
});

const job = (i: number, over: Partial<ProcessingJob> = {}): ProcessingJob => ({
  datasetId: 'ds1',
  itemId: `item-${i}`,
  url: `http://img.test/${i}.png`,
  attempt: 1,
  ...over,
});

async function until(cond: () => boolean | Promise<boolean>, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(adapters)('JobQueue contract: %s', (_name, adapter) => {
  const open: JobQueue[] = [];
  const openQueue = async (place: string, now?: () => number): Promise<JobQueue> => {
    const q = await adapter.open(place, now);
    open.push(q);
    return q;
  };
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });

  test('delivers every enqueued job to the handler with its payload intact', async () => {
    const q = await openQueue(adapter.newPlace());
    const jobs = Array.from({ length: 25 }, (_, i) => job(i));
    await q.enqueue(jobs);
    const seen: ProcessingJob[] = [];
    await q.consume(async (j) => {
      seen.push(j);
    }, 4);
    await until(() => seen.length >= 25);
    expect(seen.map((j) => j.itemId).sort()).toEqual(jobs.map((j) => j.itemId).sort());
    expect(seen.find((j) => j.itemId === 'item-7')).toEqual(job(7));
    const stats = await q.stats();
    expect(stats).toMatchObject({ ready: 0, running: 0, dead: 0 });
  });

  test('jobs enqueued before a restart are delivered after it', async () => {
    const place = adapter.newPlace();
    const first = await openQueue(place);
    await first.enqueue([job(1), job(2), job(3)]);
    await first.close();
    const second = await openQueue(place);
    const seen: string[] = [];
    await second.consume(async (j) => {
      seen.push(j.itemId);
    }, 2);
    await until(() => seen.length >= 3);
    expect(seen.sort()).toEqual(['item-1', 'item-2', 'item-3']);
  });

  test('never runs more than `concurrency` jobs at once', async () => {
    const q = await openQueue(adapter.newPlace());
    await q.enqueue(Array.from({ length: 12 }, (_, i) => job(i)));
    let now = 0;
    let peak = 0;
    let done = 0;
    await q.consume(async () => {
      now++;
      peak = Math.max(peak, now);
      await new Promise((r) => setTimeout(r, 30));
      now--;
      done++;
    }, 3);
    await until(() => done === 12);
    expect(peak).toBe(3);
  });

  test('RetryLater redelivers after the delay with the attempt counted', async () => {
    const q = await openQueue(adapter.newPlace());
    await q.enqueue([job(1)]);
    const attempts: Array<{ attempt: number; at: number }> = [];
    await q.consume(async (j) => {
      attempts.push({ attempt: j.attempt, at: Date.now() });
      if (j.attempt < 3) throw new RetryLater(300, 'try later');
    }, 1);
    await until(() => attempts.length === 3);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
    expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(250);
    expect(attempts[2]!.at - attempts[1]!.at).toBeGreaterThanOrEqual(250);
  });

  test('Defer runs the job again after the delay with its deferrals counted, not its attempts', async () => {
    const q = await openQueue(adapter.newPlace());
    await q.enqueue([job(1)]);
    const seen: Array<{ job: ProcessingJob; at: number }> = [];
    await q.consume(async (j) => {
      seen.push({ job: j, at: Date.now() });
      if ((j.deferrals ?? 0) < 6) throw new Defer(100);
    }, 1);
    await until(() => seen.length === 7);
    expect(seen.map((s) => [s.job.attempt, s.job.deferrals ?? 0])).toEqual(
      [0, 1, 2, 3, 4, 5, 6].map((d) => [1, d]),
    );
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(80);
    expect((await q.stats()).dead).toBe(0);
  });

  test('a job that keeps failing unexpectedly is parked as dead, not retried forever', async () => {
    const q = await openQueue(adapter.newPlace());
    await q.enqueue([job(1)]);
    let calls = 0;
    await q.consume(async () => {
      calls++;
      throw new Error('bug');
    }, 1);
    await until(() => calls >= 5, 20000);
    // Parked: nothing of it is left waiting, delayed or in flight, so no later call can come.
    await until(async () => {
      const s = await q.stats();
      return s.dead === 1 && s.ready + s.delayed + s.running === 0;
    });
    expect(calls).toBe(5);
  });

  test('while the store is unavailable, jobs wait uncounted and nothing is consumed until the probe answers', async () => {
    const q = await openQueue(adapter.newPlace());
    await q.enqueue(Array.from({ length: 6 }, (_, i) => job(i)));
    let down = true;
    let calls = 0;
    let probes = 0;
    const done: ProcessingJob[] = [];
    let recovered = 0;
    q.onRecovered = () => recovered++;
    await q.consume(
      async (j) => {
        calls++;
        if (down) throw new AppError('unavailable', 'the search engine is unreachable');
        done.push(j);
      },
      2,
      async () => {
        probes++;
        if (down) throw new Error('still down');
      },
    );
    // Paused with every job back in the queue, none delayed or dead (as an unexpected error's
    // backoff would leave them), and the probe refused and asked again: a consumer that went
    // on taking jobs, or resumed on a refusal, would have taken more by then.
    await until(async () => {
      if (probes < 2) return false;
      const s = await q.stats();
      return s.ready === 6 && s.delayed + s.running + s.dead === 0;
    });
    expect(calls).toBeLessThanOrEqual(2);
    expect(done).toHaveLength(0);
    down = false;
    await until(() => done.length === 6, 20000);
    expect(done.every((j) => j.attempt === 1)).toBe(true);
    expect(done.map((j) => j.itemId).sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => `item-${i}`).sort(),
    );
    expect(recovered).toBeGreaterThanOrEqual(1);
    expect((await q.stats()).dead).toBe(0);
  });

  test('while paused, the oldest job age counts from when the job first became runnable', async () => {
    let clock = Date.now();
    const q = await openQueue(adapter.newPlace(), () => clock);
    const enqueued = clock;
    await q.enqueue([job(1), job(2)]);
    // The jobs wait unconsumed first, so an age that restarted when they were put back would
    // fall short of the wait.
    clock += 600;
    let down = true;
    let calls = 0;
    const done: string[] = [];
    // Concurrency covers every job: each is taken, fails and is put back, none stays behind.
    await q.consume(
      async (j) => {
        calls++;
        if (down) throw new AppError('unavailable', 'the search engine is unreachable');
        done.push(j.itemId);
      },
      2,
      async () => {
        if (down) throw new Error('still down');
      },
    );
    // Both taken, failed and put back to wait.
    await until(async () => {
      const s = await q.stats();
      return calls >= 2 && s.ready === 2 && s.running === 0;
    });
    for (const wait of [400, 600]) {
      clock += wait;
      expect(await q.stats()).toMatchObject({ ready: 2, oldestReadyAgeMs: clock - enqueued });
    }
    down = false;
    await until(() => done.length === 2, 20000);
    expect(await q.stats()).toMatchObject({ ready: 0, oldestReadyAgeMs: 0 });
  });

  test('stop() waits for jobs in flight and then takes no more', async () => {
    const place = adapter.newPlace();
    const q = await openQueue(place);
    await q.enqueue([job(1), job(2), job(3), job(4)]);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    const finished: string[] = [];
    await q.consume(async (j) => {
      started.push(j.itemId);
      await held;
      finished.push(j.itemId);
    }, 2);
    await until(() => started.length === 2);
    let stopped = false;
    const stopping = q.stop().then(() => {
      stopped = true;
    });
    // A round trip to the queue, which still has both jobs in flight, and a turn of the event
    // loop: a stop that did not wait for them would have resolved by now.
    expect((await q.stats()).running).toBe(2);
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished.sort()).toEqual(started.sort());
    // A later job wakes a consumer that still takes jobs; then another consumer takes every job
    // left. Had the stopped one taken any, it would be missing there.
    await q.enqueue([job(5)]);
    const next = await openQueue(place);
    const rest: string[] = [];
    await next.consume(async (j) => {
      rest.push(j.itemId);
    }, 2);
    await until(() => started.length + rest.length >= 5);
    expect(started).toHaveLength(2);
    expect([...started, ...rest].sort()).toEqual([1, 2, 3, 4, 5].map((i) => `item-${i}`));
  });
});
