import { GroupCommit } from '../../src/adapters/group-commit';

test('a lone request is written at once; those arriving meanwhile go together in the next batch', async () => {
  const batches: number[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const g = new GroupCommit(async (batch: number[]) => {
    batches.push(batch);
    if (batches.length === 1) await gate;
    return batch.map((n) => n * 10);
  }, 3);
  const first = g.submit(1);
  const rest = [2, 3, 4, 5, 6].map((n) => g.submit(n));
  expect(batches).toEqual([[1]]);
  release();
  expect(await first).toBe(10);
  expect(await Promise.all(rest)).toEqual([20, 30, 40, 50, 60]);
  // at most three per batch, in arrival order
  expect(batches).toEqual([[1], [2, 3, 4], [5, 6]]);
});

test('a failed batch fails its own requests only; the next batch is still written', async () => {
  let calls = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const g = new GroupCommit(async (batch: string[]) => {
    calls++;
    if (calls === 1) {
      await gate;
      throw new Error('store unreachable');
    }
    return batch.map((s) => s.toUpperCase());
  }, 10);
  const failing = g.submit('a');
  const next = g.submit('b');
  release();
  await expect(failing).rejects.toThrow('store unreachable');
  expect(await next).toBe('B');
});

describe('with a linger', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** A group commit that records its batches; `hold` may keep a batch's commit open. */
  const recording = (maxBatch: number, lingerMs: number, hold?: (n: number) => Promise<void>) => {
    const batches: number[][] = [];
    const g = new GroupCommit(
      async (batch: number[]) => {
        batches.push(batch);
        await hold?.(batches.length);
        return batch;
      },
      maxBatch,
      lingerMs,
    );
    return { g, batches };
  };

  test('requests arriving within lingerMs of the first share one batch, written no later than that', async () => {
    const { g, batches } = recording(10, 20);
    const first = g.submit(1);
    await jest.advanceTimersByTimeAsync(5);
    const second = g.submit(2);
    await jest.advanceTimersByTimeAsync(10);
    expect(batches).toEqual([]);
    await jest.advanceTimersByTimeAsync(5);
    expect(batches).toEqual([[1, 2]]);
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    // a lone request later waits its own linger, not more
    const third = g.submit(3);
    await jest.advanceTimersByTimeAsync(20);
    expect(await third).toBe(3);
    expect(batches).toEqual([[1, 2], [3]]);
  });

  test('a full batch is written at once, without waiting out the linger', async () => {
    const { g, batches } = recording(3, 1000);
    const all = [1, 2, 3, 4].map((n) => g.submit(n));
    await jest.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([[1, 2, 3]]);
    await jest.advanceTimersByTimeAsync(1000);
    expect(await Promise.all(all)).toEqual([1, 2, 3, 4]);
    expect(batches).toEqual([[1, 2, 3], [4]]);
  });

  test('requests arriving during a commit wait only the rest of their own linger', async () => {
    let release!: () => void;
    const { g, batches } = recording(10, 20, async (n) => {
      if (n === 1) await new Promise<void>((r) => (release = r));
    });
    const first = g.submit(1);
    await jest.advanceTimersByTimeAsync(20);
    expect(batches).toEqual([[1]]);
    const second = g.submit(2);
    await jest.advanceTimersByTimeAsync(15); // the first commit takes 15 ms
    release();
    await jest.advanceTimersByTimeAsync(4);
    expect(batches).toEqual([[1]]);
    await jest.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([[1], [2]]);
    expect(await Promise.all([first, second])).toEqual([1, 2]);
  });
});
