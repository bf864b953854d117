import pino from 'pino';
import type { Dataset } from '../../src/domain/dataset';
import { DEFAULT_PLAN } from '../../src/domain/plan';
import type { EventLog } from '../../src/ports/event-log';
import type { ChargeReceipt, RequestCharge, UsageLedger } from '../../src/ports/usage-ledger';
import { MeteringService } from '../../src/services/metering';
import type { PlanReads } from '../../src/services/plans';

/** A ledger that records after the answer (as on Elasticsearch) and holds refunds until told. */
function ledger(leased: boolean) {
  const refunds: ChargeReceipt[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const l = {
    admit: async (c: RequestCharge) => ({
      receipt: { id: 'r', charge: c, ...(leased ? { leased } : {}) },
      recorded: Promise.resolve(),
    }),
    refund: async (r: ChargeReceipt) => {
      await held;
      refunds.push(r);
    },
  } as unknown as UsageLedger;
  return { l, refunds, release };
}

const plans = {
  get: async (name: string) => ({ name, plan: DEFAULT_PLAN }),
} as unknown as PlanReads;
const events = { append: async () => undefined } as unknown as EventLog;
const ds = { id: 'd1', org: 'acme' } as Dataset;

test.each([true, false])(
  'a failed request answers its error; a refund recorded after the answer (%s) does not hold it',
  async (leased) => {
    const { l, refunds, release } = ledger(leased);
    const m = new MeteringService(plans, l, events, pino({ level: 'silent' }), Date.now);
    let answered = false;
    const request = m
      .billed(ds, 'search', {}, async () => {
        throw new Error('engine down');
      })
      .catch((e: Error) => {
        answered = true;
        return e.message;
      });
    // the refund is held: a leased receipt's request answers anyway, a plain one waits for it
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(leased);
    expect(refunds).toHaveLength(0);
    const draining = m.drain();
    release();
    await expect(request).resolves.toBe('engine down');
    await draining;
    // and shutdown waited for it
    expect(refunds).toHaveLength(1);
  },
);

test('a refund that fails is logged, and the request still answers its own error', async () => {
  const errors: unknown[] = [];
  const log = pino({ level: 'error' }, { write: (s: string) => void errors.push(JSON.parse(s)) });
  const l = {
    admit: async (c: RequestCharge) => ({
      receipt: { id: 'r', charge: c },
      recorded: Promise.resolve(),
    }),
    refund: async () => {
      throw new Error('store down');
    },
  } as unknown as UsageLedger;
  const m = new MeteringService(plans, l, events, log, Date.now);
  await expect(
    m.billed(ds, 'search', {}, async () => {
      throw new Error('engine down');
    }),
  ).rejects.toThrow('engine down');
  expect(errors).toEqual([
    expect.objectContaining({ msg: 'charge of a failed request not refunded' }),
  ]);
});
