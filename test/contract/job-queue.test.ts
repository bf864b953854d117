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
  /**
   * What ends a job's delay (RetryLater, Defer). `clock`: the queue's own clock, which each
   * job's run_at is compared with. `broker`: the message TTL of the retry queue the job waits
   * in, which the broker counts in real time, whatever the queue's clock says.
   */
  delays: 'clock' | 'broker';
}

const adapters = tierOf<Adapter>({
  local: [
    'in-process (SQLite)',
    {
      newPlace: () => path.join(tempDir('vss-queue-'), 'queue.db'),
      open: async (file, now = Date.now) => new SqliteJobQueue(file, log, now, 20),
      delays: 'clock',
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
      delays: 'broker',
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

/**
 * The delay of the RetryLater and Defer cases. On the broker it runs out in real time, and the
 * job is seen held while it does: a round trip to the broker every 20 ms fits many times over.
 */
const DELAY_MS = 1000;

/** The runs of item-1 among the jobs a handler was given. */
const item1 = (seen: ProcessingJob[]): ProcessingJob[] => seen.filter((j) => j.itemId === 'item-1');

/** A clock that moves only when told to. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let at = Date.now();
  return { now: () => at, advance: (ms) => void (at += ms) };
}

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

  /**
   * Waits until item-1 has been run `runs` times (of the jobs `seen`) and is held back: delayed,
   * neither ready nor running. Where delays follow the queue's clock, it stays so until the clock
   * has passed the whole delay: 1 ms short of it, a job enqueued then wakes the consumer, which
   * has room for both and takes only that one; at the delay, item-1 is ready. On the broker the
   * TTL runs out by itself, in real time.
   */
  async function heldFor(
    q: JobQueue,
    delayMs: number,
    clock: { advance: (ms: number) => void },
    seen: ProcessingJob[],
    runs: number,
  ): Promise<void> {
    await until(async () => {
      if (item1(seen).length !== runs) return false;
      const s = await q.stats();
      return s.delayed === 1 && s.ready + s.running === 0;
    });
    if (adapter.delays !== 'clock') return;
    clock.advance(delayMs - 1);
    expect(await q.stats()).toMatchObject({ ready: 0, delayed: 1 });
    const other = job(100 + runs);
    await q.enqueue([other]);
    await until(() => seen.some((j) => j.itemId === other.itemId));
    expect(item1(seen)).toHaveLength(runs);
    clock.advance(1);
    expect(await q.stats()).toMatchObject({ ready: 1, delayed: 0 });
  }

  test('RetryLater holds the job back for the delay, then runs it again with the attempt counted', async () => {
    const clock = manualClock();
    const q = await openQueue(adapter.newPlace(), clock.now);
    await q.enqueue([job(1)]);
    const seen: ProcessingJob[] = [];
    await q.consume(async (j) => {
      seen.push(j);
      if (j.itemId === 'item-1' && j.attempt < 3) throw new RetryLater(DELAY_MS, 'try later');
    }, 2);
    for (const runs of [1, 2]) {
      await heldFor(q, DELAY_MS, clock, seen, runs);
      await until(() => item1(seen).length > runs);
    }
    await until(async () => {
      const s = await q.stats();
      return s.ready + s.delayed + s.running === 0;
    });
    expect(item1(seen).map((j) => j.attempt)).toEqual([1, 2, 3]);
  });

  test('Defer holds the job back for the delay, then runs it again with its deferrals counted, not its attempts', async () => {
    const clock = manualClock();
    const q = await openQueue(adapter.newPlace(), clock.now);
    await q.enqueue([job(1)]);
    const seen: ProcessingJob[] = [];
    await q.consume(async (j) => {
      seen.push(j);
      // The first deferral is watched while it waits; the others step aside for no time at
      // all, more often than an unexpected error may be retried.
      const deferrals = j.deferrals ?? 0;
      if (j.itemId === 'item-1' && deferrals < 6) throw new Defer(deferrals === 0 ? DELAY_MS : 0);
    }, 2);
    await heldFor(q, DELAY_MS, clock, seen, 1);
    await until(() => item1(seen).length === 7);
    expect(item1(seen).map((j) => [j.attempt, j.deferrals ?? 0])).toEqual(
      [0, 1, 2, 3, 4, 5, 6].map((d) => [1, d]),
    );
    await until(async () => {
      const s = await q.stats();
      return s.ready + s.delayed + s.running === 0;
    });
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
