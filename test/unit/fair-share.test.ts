import { FairShare, SLOW_HOST_MS, deferDelayMs } from '../../src/jobs/fair-share';

describe('FairShare: worker download slots per image host and organisation', () => {
  let now = 0;
  const clock = () => now;
  const take = (fs: FairShare, host: string, org: string, n: number): Array<() => void> => {
    const got: Array<() => void> = [];
    for (let i = 0; i < n; i++) {
      const r = fs.tryAcquire(host, org);
      if (r) got.push(r);
    }
    return got;
  };
  beforeEach(() => {
    now = 1_000_000;
  });

  test('one tenant on a host seen to be fast may use every slot; an unknown host gets half', () => {
    const fs = new FairShare(4, clock);
    const first = take(fs, 'cdn.example:443', 'a', 6);
    expect(first).toHaveLength(2);
    now += 80;
    first[0]!(); // a quick download: the host is fast
    expect(take(fs, 'cdn.example:443', 'a', 6)).toHaveLength(3);
  });

  test('a slow host holds at most half the slots, so another host still gets some', () => {
    const fs = new FairShare(4, clock);
    const first = take(fs, 'slow.example', 'a', 4);
    expect(first).toHaveLength(2);
    now += SLOW_HOST_MS + 1; // its downloads are still running: it is slow
    first.forEach((r) => r());
    expect(take(fs, 'slow.example', 'a', 4)).toHaveLength(2);
    const fast = take(fs, 'fast.example', 'a', 4);
    expect(fast).toHaveLength(2);
    now += 50;
    fast[0]!();
    expect(take(fs, 'fast.example', 'a', 4)).toHaveLength(1); // all four slots in use again
  });

  test('while two organisations have downloads running, each gets at most an equal share', () => {
    const fs = new FairShare(4, clock);
    expect(fs.tryAcquire('h1', 'b')).toBeDefined(); // b was seen
    const a = take(fs, 'h2', 'a', 4);
    expect(a).toHaveLength(2);
    now += 11_000; // b's download is still running, however long ago it started
    a.forEach((r) => r());
    expect(take(fs, 'h2', 'a', 4)).toHaveLength(2); // b still holds its slot: still two orgs
  });

  test('an organisation that went quiet no longer limits the other: it may use every slot', () => {
    const fs = new FairShare(4, clock);
    fs.tryAcquire('h1', 'b')!();
    expect(take(fs, 'h2', 'a', 4)).toHaveLength(2);
    now += 11_000;
    const more = take(fs, 'h3', 'a', 4);
    expect(more).toHaveLength(2); // with the two it holds: all four
  });

  test('a released slot is released once, however often its function is called', () => {
    const fs = new FairShare(1, clock);
    const r = fs.tryAcquire('h', 'a')!;
    r();
    r();
    expect(take(fs, 'h', 'a', 3)).toHaveLength(1);
  });

  test('deferral delays double from 500 ms and stop growing at 16 s', () => {
    expect([0, 1, 2, 5, 9].map(deferDelayMs)).toEqual([500, 1000, 2000, 16000, 16000]);
  });

  test('an organisation waiting for a slot counts at once: the busy one gets only its share', () => {
    const fs = new FairShare(4, clock);
    const fast = take(fs, 'cdn.example:443', 'a', 2);
    now += 10;
    fast.forEach((r) => r()); // the host is fast: a alone may use all four
    expect(take(fs, 'cdn.example:443', 'a', 3)).toHaveLength(3);
    fs.noteWaiting('b');
    // a holds 3 of the 2 it may hold now that b waits: its next job steps aside
    expect(fs.tryAcquire('cdn.example:443', 'a')).toBeUndefined();
    expect(fs.tryAcquire('cdn.example:443', 'b')).toBeDefined();
  });
});
