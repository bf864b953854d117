import { RecentReads } from '../../src/lib/recent-reads';

function counted<V>(values: Array<V | undefined | Error>) {
  let calls = 0;
  const read = async (): Promise<V | undefined> => {
    const v = values[Math.min(calls++, values.length - 1)];
    if (v instanceof Error) throw v;
    return v;
  };
  return { read, calls: () => calls };
}

const settle = () => new Promise((r) => setImmediate(r));

test('a found record is kept for the time given from when its read began, then read again', async () => {
  let now = 0;
  const recent = new RecentReads<string>(1000, () => now);
  const r = counted(['a', 'b']);
  expect(await recent.get('k', r.read)).toBe('a');
  now = 499;
  expect(await recent.get('k', r.read)).toBe('a');
  expect(r.calls()).toBe(1);
  now = 1000;
  expect(await recent.get('k', r.read)).toBe('b');
  expect(r.calls()).toBe(2);
});

test('past half its time a hit is read again in the background: steady traffic never waits', async () => {
  let now = 0;
  const recent = new RecentReads<string>(1000, () => now);
  const r = counted(['a', 'b', 'c']);
  expect(await recent.get('k', r.read)).toBe('a');
  now = 600;
  // answered from what is kept, while the read runs behind it
  expect(await recent.get('k', r.read)).toBe('a');
  await settle();
  expect(r.calls()).toBe(2);
  // the background read (begun at 600) is kept until 1600, not 1000
  now = 1050;
  expect(await recent.get('k', r.read)).toBe('b');
  expect(r.calls()).toBe(2);
  now = 1600;
  expect(await recent.get('k', r.read)).toBe('c');
});

test('a background read that finds nothing drops the record; one that fails lets it expire', async () => {
  let now = 0;
  const revoked = new RecentReads<string>(1000, () => now);
  const r1 = counted<string>(['a', undefined, 'c']);
  await revoked.get('k', r1.read);
  now = 600;
  await revoked.get('k', r1.read);
  await settle();
  now = 700; // revoked elsewhere: seen before the record's time is up
  expect(await revoked.get('k', r1.read)).toBe('c');

  now = 0;
  const failing = new RecentReads<string>(1000, () => now);
  const r2 = counted<string>(['a', new Error('unreachable'), 'c']);
  await failing.get('k', r2.read);
  now = 600;
  await failing.get('k', r2.read);
  await settle();
  now = 700;
  expect(await failing.get('k', r2.read)).toBe('a');
  expect(r2.calls()).toBe(2); // no second background read while the store fails
  now = 1000;
  expect(await failing.get('k', r2.read)).toBe('c');
});

test('a background read under way when the key is forgotten is not kept', async () => {
  let now = 0;
  const recent = new RecentReads<string>(1000, () => now);
  let release!: (v: string) => void;
  await recent.get('k', async () => 'a');
  now = 600;
  await recent.get('k', () => new Promise((res) => (release = res)));
  recent.forget('k'); // a write by this process while the background read is on its way
  release('old');
  await settle();
  expect(await recent.get('k', async () => 'new')).toBe('new');
});

test('only what `keep` accepts is kept (a dataset below the readiness threshold is read each time)', async () => {
  const recent = new RecentReads<number>(
    1000,
    () => 0,
    (n) => (n ?? 0) >= 200,
  );
  const r = counted([150, 250, 300]);
  expect(await recent.get('d', r.read)).toBe(150);
  expect(await recent.get('d', r.read)).toBe(250);
  expect(await recent.get('d', r.read)).toBe(250);
  expect(r.calls()).toBe(2);
});

test('"not found" and failures are never kept: a record made elsewhere is seen at once', async () => {
  const recent = new RecentReads<string>(1000, () => 0);
  const r = counted<string>([undefined, new Error('unreachable'), 'made']);
  expect(await recent.get('k', r.read)).toBeUndefined();
  await expect(recent.get('k', r.read)).rejects.toThrow('unreachable');
  expect(await recent.get('k', r.read)).toBe('made');
  expect(r.calls()).toBe(3);
});

test('concurrent misses share one read; forget and clear drop what was kept', async () => {
  const recent = new RecentReads<string>(1000, () => 0);
  const r = counted(['a', 'b', 'c']);
  const both = await Promise.all([recent.get('k', r.read), recent.get('k', r.read)]);
  expect(both).toEqual(['a', 'a']);
  expect(r.calls()).toBe(1);
  recent.forget('k');
  expect(await recent.get('k', r.read)).toBe('b');
  recent.clear();
  expect(await recent.get('k', r.read)).toBe('c');
});

test('a read in flight when its key is forgotten is not kept afterwards', async () => {
  const recent = new RecentReads<string>(1000, () => 0);
  let release!: (v: string) => void;
  const slow = recent.get('k', () => new Promise((res) => (release = res)));
  recent.forget('k'); // a write by this process while the old value is on its way
  release('old');
  expect(await slow).toBe('old');
  expect(await recent.get('k', async () => 'new')).toBe('new');
});
