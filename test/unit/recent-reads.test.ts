import { RecentReads } from '../../src/adapters/elasticsearch/recent-reads';

function counted<V>(values: Array<V | undefined | Error>) {
  let calls = 0;
  const read = async (): Promise<V | undefined> => {
    const v = values[Math.min(calls++, values.length - 1)];
    if (v instanceof Error) throw v;
    return v;
  };
  return { read, calls: () => calls };
}

test('a found record is kept for the time given, then read again', async () => {
  let now = 0;
  const recent = new RecentReads<string>(1000, () => now);
  const r = counted(['a', 'b']);
  expect(await recent.get('k', r.read)).toBe('a');
  now = 999;
  expect(await recent.get('k', r.read)).toBe('a');
  now = 1000;
  expect(await recent.get('k', r.read)).toBe('b');
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
