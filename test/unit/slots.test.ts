import { Slots, SlotsClosed } from '../../src/lib/slots';

test('at most `size` holders; waiters get a slot in arrival order as holders release', async () => {
  const slots = new Slots(2);
  const order: string[] = [];
  const a = await slots.acquire();
  const b = await slots.acquire();
  const c = slots.acquire().then((r) => (order.push('c'), r));
  const d = slots.acquire().then((r) => (order.push('d'), r));
  await Promise.resolve();
  expect(order).toEqual([]);
  a();
  const releaseC = await c;
  expect(order).toEqual(['c']);
  b();
  await d;
  expect(order).toEqual(['c', 'd']);
  releaseC();
});

test('a release called twice frees one slot only', async () => {
  const slots = new Slots(1);
  const a = await slots.acquire();
  const waiters = [slots.acquire(), slots.acquire()];
  let got = 0;
  waiters.forEach((w) => void w.then(() => got++));
  a();
  a();
  await new Promise((r) => setImmediate(r));
  expect(got).toBe(1);
});

test('close turns the waiters and later requests away; holders keep their slots', async () => {
  const slots = new Slots(1);
  const held = await slots.acquire();
  const waiting = slots.acquire();
  slots.close();
  await expect(waiting).rejects.toBeInstanceOf(SlotsClosed);
  await expect(slots.acquire()).rejects.toBeInstanceOf(SlotsClosed);
  held();
});
