/**
 * Credit leases on Elasticsearch (EsCreditCounter): a process admits from a block of credits it
 * set aside, and a fixed package still admits exactly R requests across hosts, however they
 * arrive: concurrently, one host after another (an idle host's block comes back), or after the
 * host holding a block was killed (its block comes back when its lease ends, within 30 s).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { CreditsDoc } from '../../../src/adapters/elasticsearch/es-credit-counter';
import type { RequestCharge } from '../../../src/ports/usage-ledger';
import { esInstallation, twoHosts, type Host } from '../../contract/engines';
import { ROOT, buildDist } from '../../helpers/processes';

const M = 1_000_000;
const AT = Date.parse('2026-06-10T00:00:00Z');
const c = (): RequestCharge => ({ org: 'o', datasetId: 'd', type: 'search', micro: M, at: AT });

async function counter(h: Host): Promise<CreditsDoc> {
  const { client, indices } = h.es!;
  const r = await client.get<CreditsDoc>({ index: indices.shared('credits'), id: 'o:202606' });
  return r._source!;
}

/**
 * Admits one at a time until refused, as metered requests do (not waiting for each record);
 * a 503 (credits held by another host past the wait) is counted and tried again. Resolves once
 * every admitted charge is recorded.
 */
async function spendAll(h: Host, limit: number): Promise<{ admitted: number; held: number }> {
  const n = { admitted: 0, held: 0 };
  const recorded: Array<Promise<void>> = [];
  for (;;) {
    const r = await h.ledger.admit(c(), limit).catch((e: { code?: string }) => {
      if (e.code === 'unavailable') return 'held' as const;
      throw e;
    });
    if (r === undefined) break;
    if (r === 'held') n.held++;
    else {
      n.admitted++;
      recorded.push(r.recorded);
    }
  }
  await Promise.all(recorded);
  return n;
}

describe('credit leases on Elasticsearch', () => {
  const hosts = twoHosts(esInstallation);

  test('admissions after the first come from the block set aside, and are recorded', async () => {
    const { a } = hosts;
    const limit = 10_000 * M;
    await a.ledger.charge(c(), limit);
    const [id, lease] = Object.entries((await counter(a)).leases ?? {})[0]!;
    expect(lease.micro).toBe(256 * M);
    const recorded = [];
    for (let i = 0; i < 5; i++) recorded.push((await a.ledger.admit(c(), limit))!.recorded);
    await Promise.all(recorded);
    const doc = await counter(a);
    expect(doc.micro).toBe(6 * M);
    expect(doc.per['d|search']!.requests).toBe(6);
    expect(doc.leases![id]!.micro).toBe(251 * M);
  });

  test('a package lowered on another host is decided on the counter, not from the block held', async () => {
    const { a } = hosts;
    await a.ledger.charge(c(), 10_000 * M);
    expect(Object.values((await counter(a)).leases ?? {})[0]!.micro).toBe(256 * M);
    // the plan now allows 2 credits this month, of which 1 is used
    expect(await a.ledger.charge(c(), 2 * M)).toBeDefined();
    expect(await a.ledger.charge(c(), 2 * M)).toBeUndefined();
    expect((await a.ledger.month('o', 2026, 6)).micro).toBe(2 * M);
  });

  test('a package of R admits exactly R of many concurrent requests over two hosts, blocks and all', async () => {
    const { a, b } = hosts;
    const R = 500;
    const results = await Promise.all(
      Array.from({ length: 3 * R }, (_, i) => (i % 2 ? a : b).ledger.admit(c(), R * M)),
    );
    expect(results.filter(Boolean)).toHaveLength(R);
    // not waiting for the records: a 402 is only decided once none is on its way (credits
    // admitted and not recorded are still set aside), so the counter is complete by then
    const june = await b.ledger.month('o', 2026, 6);
    expect(june.micro).toBe(R * M);
    expect(june.perDataset).toEqual([
      { datasetId: 'd', type: 'search', requests: R, micro: R * M },
    ]);
    expect(await a.ledger.charge(c(), R * M)).toBeUndefined();
  });

  test('one host after the other: the idle block of the first comes back to the second', async () => {
    const { a, b } = hosts;
    const R = 400;
    expect(await a.ledger.charge(c(), R * M)).toBeDefined();
    expect(Object.keys((await counter(a)).leases ?? {})).toHaveLength(1);
    // never a 503: the first host's idle block came back while the second waited for it
    expect(await spendAll(b, R * M)).toEqual({ admitted: R - 1, held: 0 });
    expect((await a.ledger.month('o', 2026, 6)).micro).toBe(R * M);
  });

  test('a host shutting down gives its block back at once', async () => {
    const { a } = hosts;
    await a.ledger.charge(c(), 10_000 * M);
    expect(Object.keys((await counter(a)).leases ?? {})).toHaveLength(1);
    await a.ledger.close!();
    expect((await counter(a)).leases).toBeUndefined();
  });

  test('the block of a killed process comes back within 30 s; the package still admits exactly R', async () => {
    buildDist();
    const { b } = hosts;
    const { indices } = b.es!;
    const R = 64;
    // a process of its own takes a block (the first charge sets 3 aside) and is killed while it
    // holds it, before it would give an idle block back
    const child = spawn(
      process.execPath,
      [
        '-e',
        `
        const dist = ${JSON.stringify(path.join(ROOT, 'dist'))};
        const { esClient } = require(dist + '/adapters/elasticsearch/client');
        const { EsIndices } = require(dist + '/adapters/elasticsearch/indices');
        const { EsCreditCounter } = require(dist + '/adapters/elasticsearch/es-credit-counter');
        const client = esClient(process.env.ES_URL);
        const credits = new EsCreditCounter(new EsIndices(client, process.env.PREFIX, { shards: 1, replicas: 0 }));
        credits.charge(${JSON.stringify(c())}, ${R * M}).then((r) => {
          process.stdout.write(r ? 'held\\n' : 'refused\\n');
          setInterval(() => {}, 1000);
        });
        `,
      ],
      {
        env: {
          PATH: process.env.PATH,
          ES_URL: process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200',
          PREFIX: indices.prefix,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const said = await new Promise<string>((resolve) =>
      child.stdout.once('data', (d: Buffer) => resolve(d.toString().trim())),
    );
    child.kill('SIGKILL');
    const killed = Date.now();
    expect(said).toBe('held');
    expect(Object.values((await counter(b)).leases ?? {}).map((l) => l.micro)).toEqual([3 * M]);
    const spent = await spendAll(b, R * M);
    expect(spent.admitted).toBe(R - 1);
    // the last three waited for the lease to end, answered 503 meanwhile, never 402
    expect(spent.held).toBeGreaterThan(0);
    expect(Date.now() - killed).toBeLessThan(30_000);
    expect((await b.ledger.month('o', 2026, 6)).micro).toBe(R * M);
  }, 60_000);
});
