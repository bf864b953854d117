/**
 * What metering costs in search throughput on a production installation: two API hosts on
 * Elasticsearch + RabbitMQ, one organisation on a fixed credit package (so the 402 check runs
 * on every request), closed-loop search at a fixed client concurrency spread over both hosts.
 * Rounds with metering on (the service as is) and off (`billed` bypassed on every host) are
 * interleaved in one run, counterbalanced (on, off, off, on, on, off, …) so a drift over the run
 * (merges, caches, the credit document growing) weighs on both modes alike.
 * Rounds are short and many, so adjacent on/off rounds see the same load from the rest of the
 * machine; pair_ratios shows how noisy it was. Each round also records CPU per request, the
 * Elasticsearch calls per request and their latency, and where a metered request's time goes.
 * Goal (issue 41): throughput with metering on ≥ 0.97 × with metering off, in every run of three.
 *
 *   npm run bench:metering   (BENCH_ITEMS, BENCH_CONCURRENCY, BENCH_ROUND_SECONDS,
 *                             BENCH_ROUNDS = rounds per mode, BENCH_WARMUP_SECONDS;
 *                             BENCH_VARIANTS = experiments, see VARIANTS below)
 */
import { Client } from '@elastic/elasticsearch';
import fs from 'node:fs';
import os from 'node:os';
import { Pool } from 'undici';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { RunningApp } from 'visual-search-service/dist/app/start';
import type { UsageLedger } from 'visual-search-service/dist/ports/usage-ledger';
import { MeteringService } from 'visual-search-service/dist/services/metering';
import { DESCRIPTOR_VECTORS, seedElasticsearch } from './seed-items';
import {
  AMQP_URL,
  ES_URL,
  OPERATOR,
  V2,
  call,
  createDataset,
  deleteInstallation,
  machine,
  startService,
  median,
  summarize,
  writeResult,
} from './common';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 20_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ROUND_S = Number(process.env.BENCH_ROUND_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 16); // per mode
const WARMUP_S = Number(process.env.BENCH_WARMUP_SECONDS ?? 5); // per mode
const GOAL = 0.97;
const CREDITS = 100_000_000;

/** The listing query of bench/search-latency.ts: page and price window vary. */
function query(i: number): string {
  const lo = 20 + (i % 10) * 5;
  return new URLSearchParams({
    q: `category:boots|sneakers|loafers,price:${lo}:${lo + 250},instock:true,color:!pink`,
    sort: 'price',
    order: i % 2 ? 'asc' : 'desc',
    page: String(1 + (i % 5)),
    limit: '24',
  }).toString();
}

/** Elasticsearch calls of the API hosts by kind, and how long each took (the hosts' own clients, observed). */
class EsCalls {
  counts = new Map<string, { n: number; ms: number }>();
  constructor(
    hosts: RunningApp[],
    private readonly prefix: string,
  ) {
    hosts.forEach((h, i) => {
      // every Elasticsearch adapter of a host shares the one client of its EsIndices
      const client = (h.container.ports.ledger as unknown as { indices: EsIndices }).indices.client;
      const sentAt = new Map<unknown, bigint>();
      client.diagnostic.on('request', (_err, r) => {
        const id = `${i}:${String(r?.meta.request.id)}`;
        if (!sentAt.has(id)) sentAt.set(id, process.hrtime.bigint());
      });
      client.diagnostic.on('response', (_err, r) => {
        const req = r?.meta.request.params;
        if (!req) return;
        const id = `${i}:${String(r.meta.request.id)}`;
        const t = sentAt.get(id);
        sentAt.delete(id);
        const status = r.statusCode ?? 0;
        const k = `${req.method} ${this.kind(req.path)}${status >= 300 ? ` ${status}` : ''}`;
        const c = this.counts.get(k) ?? { n: 0, ms: 0 };
        c.n++;
        if (t) c.ms += Number(process.hrtime.bigint() - t) / 1e6;
        this.counts.set(k, c);
      });
    });
  }

  /** `/<prefix>credits/_doc/bench:202607` → `credits/_doc` */
  kind(p: string): string {
    const [index = '', api = ''] = decodeURIComponent(p.split('?')[0]!).split('/').slice(1);
    const name = (index.startsWith(this.prefix) ? index.slice(this.prefix.length) : index).replace(
      /^items-.*/,
      'items',
    );
    return api ? `${name}/${api}` : name;
  }

  /** Calls per request and mean ms per call, by kind, since the last take. */
  take(requests: number): { perRequest: Record<string, number>; ms: Record<string, number> } {
    const kinds = [...this.counts].sort(([a], [b]) => a.localeCompare(b));
    this.counts.clear();
    return {
      perRequest: Object.fromEntries(kinds.map(([k, c]) => [k, round2(c.n / requests)])),
      ms: Object.fromEntries(kinds.map(([k, c]) => [k, round2(c.ms / c.n)])),
    };
  }
}

/**
 * Experiments (BENCH_VARIANTS, comma-separated; `a+b` combines): metering on, with one part
 * changed by patching this process's instances — never the code in src/. They say what each
 * part of metering costs. Also `translog-async`: the credits and events indices without an
 * fsync per write (index.translog.durability=async), set on Elasticsearch for those rounds
 * (`credits-translog-async`, `events-translog-async`: one of them).
 * An experiment run writes to the temp directory, never to bench/results.
 */
type Variant = 'no-events' | 'no-ledger' | 'charge-async' | 'plan-refresh-ahead';
type Patch = (m: MeteringService, host: number) => (() => void) | void;
const VARIANTS: Record<Variant, Patch> = {
  /**
   * The plan read once, then refreshed in the background at most once a second (one read in
   * flight per organisation): no request waits for it after the first.
   */
  'plan-refresh-ahead': (m) => {
    const accounts = (m as unknown as { accounts: RunningApp['container']['ports']['accounts'] })
      .accounts;
    type Org = NonNullable<Awaited<ReturnType<typeof accounts.getOrg>>>;
    const plans = new Map<string, { org: Promise<Org>; at: number; refreshing: boolean }>();
    const read = async (name: string): Promise<Org> => {
      const org = await accounts.getOrg(name);
      if (!org) throw new Error(`organisation '${name}' not found`);
      return org;
    };
    Object.assign(m, {
      organisation(name: string): Promise<Org> {
        const p = plans.get(name);
        if (!p) {
          const entry = { org: read(name), at: Date.now(), refreshing: false };
          entry.org.catch(() => plans.delete(name));
          plans.set(name, entry);
          return entry.org;
        }
        if (Date.now() - p.at > 1000 && !p.refreshing) {
          p.refreshing = true;
          read(name).then(
            (org) =>
              plans.set(name, { org: Promise.resolve(org), at: Date.now(), refreshing: false }),
            () => (p.refreshing = false),
          );
        }
        return p.org;
      },
    });
    return () => {
      delete (m as unknown as { organisation?: unknown }).organisation;
    };
  },
  /** No event-log append (analytics only; the response never waits for it). */
  'no-events': (m) => {
    (m as unknown as { record(): void }).record = () => undefined;
  },
  /** The credit counter not written (every charge admitted at once): the plan read remains. */
  'no-ledger': (m) => {
    (m as unknown as { ledger: Pick<UsageLedger, 'charge' | 'admit' | 'refund'> }).ledger = {
      charge: (c) => Promise.resolve({ id: 'x', charge: c }),
      admit: (c) =>
        Promise.resolve({ receipt: { id: 'x', charge: c }, recorded: Promise.resolve() }),
      refund: () => Promise.resolve(),
    };
  },
  /**
   * The response does not wait for the charge (it is still made, in the background): what is
   * left is the work metering adds, not the wait.
   */
  'charge-async': (m) => {
    const charge = (m as unknown as { charge(ds: unknown, type: unknown): Promise<unknown> })
      .charge;
    Object.assign(m, {
      charge(ds: unknown, type: unknown) {
        charge.call(m, ds, type).catch(() => undefined);
        return Promise.resolve({ id: 'async' });
      },
    });
    return () => {
      delete (m as unknown as { charge?: unknown }).charge;
    };
  },
};

const variants = (process.env.BENCH_VARIANTS ?? '')
  .split(',')
  .map((v) => v.trim())
  .filter(Boolean);
for (const v of variants.flatMap((x) => x.split('+')))
  if (!(v in VARIANTS) && !/^(credits-|events-)?translog-async$/.test(v))
    throw new Error(`BENCH_VARIANTS: unknown ${v} (${Object.keys(VARIANTS)})`);
const MODES: string[] = ['on', 'off', ...variants];

interface Round {
  mode: string;
  seconds: number;
  requests: number;
  throughput: number;
  p50: number;
  p95: number;
  /** CPU of this process (service and load clients) and of the Elasticsearch node, per request. */
  node_cpu_ms_per_request: number;
  es_cpu_ms_per_request: number;
  /**
   * Where time goes: mean ms per call of the engine search, the plan read and the credit
   * charge; metering_wait = mean ms per request a response waited for its charge after its
   * search was done.
   */
  timings_ms: Record<string, number>;
  es_calls_per_request: Record<string, number>;
  es_ms_per_call: Record<string, number>;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

/** Mean time per call of a method of an instance, measured by wrapping it on the instance. */
class Timers {
  private sums = new Map<string, { ms: number; n: number }>();
  wrap<O extends object>(name: string, obj: O, method: keyof O & string): void {
    const orig = (obj[method] as (...a: unknown[]) => Promise<unknown>).bind(obj);
    Object.assign(obj, {
      [method]: (...args: unknown[]) => {
        const t = process.hrtime.bigint();
        const p = orig(...args);
        void p.then(
          () => this.add(name, Number(process.hrtime.bigint() - t) / 1e6),
          () => undefined,
        );
        return p;
      },
    });
  }

  add(name: string, ms: number): void {
    const s = this.sums.get(name) ?? { ms: 0, n: 0 };
    s.ms += ms;
    s.n++;
    this.sums.set(name, s);
  }

  /** Mean ms per call, and per request (for events that occur on some requests only). */
  take(requests: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, s] of [...this.sums].sort(([a], [b]) => a.localeCompare(b)))
      out[k] = round2(k === 'metering_wait' ? s.ms / requests : s.ms / s.n);
    this.sums.clear();
    return out;
  }
}

async function esCpuMs(es: Client): Promise<number> {
  const r = await es.nodes.stats({ node_id: '_local', metric: 'process' });
  return Object.values(r.nodes)[0]?.process?.cpu?.total_in_millis ?? 0;
}

async function main(): Promise<void> {
  const tag = `bm${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const prefix = `${tag}-`;
  const queuePrefix = `bench.${tag}.`;
  const env = {
    APP_ROLES: 'api',
    EMBEDDER: 'descriptor',
    SEARCH_BACKEND: 'elasticsearch',
    ELASTICSEARCH_URL: ES_URL,
    ELASTICSEARCH_REPLICAS: '0',
    ES_INDEX_PREFIX: prefix,
    QUEUE: 'rabbitmq',
    AMQP_URL,
    AMQP_QUEUE_PREFIX: queuePrefix,
  };
  const started = Date.now();
  const loadStart = round2(os.loadavg()[0]!);
  const hosts: RunningApp[] = [];
  const es = new Client({ node: ES_URL });
  // the seed's writes go as the service sends them (vectors as float32 text)
  const writer = esClient(ES_URL);
  const pools: Pool[] = [];
  try {
    for (let i = 0; i < 2; i++) hosts.push(await startService(env));
    const [a, b] = hosts as [RunningApp, RunningApp];
    // the org and dataset through one host, the plan through the other
    const { dsToken, datasetId } = await createDataset(a, 'shoes');
    const plan = await call(b.url!, 'PUT', '/orgs/bench/plan', OPERATOR, {
      plan: { credits: { limitType: 'fixed', limit: CREDITS } },
    });
    if (plan.status !== 200) throw new Error(`plan: ${JSON.stringify(plan.body)}`);
    const t0 = Date.now();
    await seedElasticsearch(
      new EsIndices(writer, prefix, { shards: 1, replicas: 0 }),
      datasetId,
      ITEMS,
      // searches only: the vectors' length does not matter here
      DESCRIPTOR_VECTORS,
    );
    const loadS = (Date.now() - t0) / 1000;
    process.stderr.write(`loaded ${ITEMS} items in ${loadS.toFixed(1)} s\n`);

    const timers = new Timers();
    for (const h of hosts) {
      const c = h.container;
      // the same instances the services hold
      timers.wrap('search', c.ports.engine, 'search');
      timers.wrap('org_lookup', c.ports.accounts, 'getOrg');
      timers.wrap('ledger_charge', c.ports.ledger, 'charge');
    }
    // the metering instances' own fields, which the variants replace
    const originals = hosts.map((h) => {
      const m = h.container.services.metering as unknown as Record<string, unknown>;
      return { accounts: m.accounts, ledger: m.ledger };
    });
    let undo: Array<() => void> = [];
    /** Elasticsearch settings of the metering indices, changed by the translog-async experiment. */
    const translog = { credits: 'request', events: 'request' };
    const setMode = async (mode: string): Promise<void> => {
      undo.forEach((f) => f());
      undo = [];
      const parts = mode.split('+');
      for (const index of ['credits', 'events'] as const) {
        const wanted =
          parts.includes('translog-async') || parts.includes(`${index}-translog-async`)
            ? 'async'
            : 'request';
        if (wanted === translog[index]) continue;
        await es.indices.putSettings({
          index: `${prefix}${index}`,
          settings: { 'index.translog.durability': wanted },
        });
        translog[index] = wanted;
      }
      hosts.forEach((h, i) => {
        const metering = h.container.services.metering;
        const m = metering as unknown as Record<string, unknown>;
        Object.assign(m, originals[i]);
        delete m.record; // the prototype's again
        delete m.billed;
        if (mode === 'as-is') return;
        if (mode === 'off') {
          metering.billed = (_ds, _type, _vars, run) => run();
          return;
        }
        if (mode !== 'on') {
          for (const v of mode.split('+')) {
            if (v.endsWith('translog-async')) continue;
            const u = VARIANTS[v as Variant](metering, i);
            if (u) undo.push(u);
          }
        }
        // how long a response waits for the charge once its search is done
        const billed = MeteringService.prototype.billed;
        metering.billed = async function <T>(
          this: MeteringService,
          ds: Parameters<MeteringService['billed']>[0],
          type: Parameters<MeteringService['billed']>[1],
          vars: Record<string, string>,
          run: () => Promise<T>,
        ): Promise<T> {
          let done = 0n;
          const r = await (billed as (...a: unknown[]) => Promise<T>).call(
            this,
            ds,
            type,
            vars,
            () =>
              run().then((v) => {
                done = process.hrtime.bigint();
                return v;
              }),
          );
          timers.add('metering_wait', Number(process.hrtime.bigint() - done) / 1e6);
          return r;
        };
      });
    };

    for (const h of hosts) pools.push(new Pool(h.url!, { connections: CONCURRENCY }));
    const path = '/orgs/bench/datasets/shoes/search?';
    const headers = { accept: V2, authorization: `token ${dsToken}` };
    let seq = 0;
    const sent = new Map<string, number>();
    const calls = new EsCalls(hosts, prefix);

    /** CONCURRENCY clients, each sending its next request when the last one is answered. */
    const latencyOf = new Map<string, number[]>(MODES.map((m) => [m, []]));
    const round = async (mode: string, seconds: number, measured = false): Promise<Round> => {
      await setMode(mode);
      calls.take(1);
      timers.take(1);
      const ms: number[] = [];
      const cpu0 = process.cpuUsage();
      const es0 = await esCpuMs(es);
      const begin = process.hrtime.bigint();
      const end = Date.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async (_, c) => {
          for (let n = c; Date.now() < end; n++) {
            const i = seq++;
            const t = process.hrtime.bigint();
            const r = await pools[n % pools.length]!.request({
              method: 'GET',
              path: path + query(i),
              headers,
            });
            const body = (await r.body.json()) as { results?: unknown[] };
            if (r.statusCode !== 200 || !body.results?.length)
              throw new Error(`search (${mode}): ${r.statusCode} ${JSON.stringify(body)}`);
            ms.push(Number(process.hrtime.bigint() - t) / 1e6);
            if (mode !== 'off' && !mode.includes('no-ledger'))
              sent.set(mode, (sent.get(mode) ?? 0) + 1);
          }
        }),
      );
      const elapsed = Number(process.hrtime.bigint() - begin) / 1e9;
      const cpu = process.cpuUsage(cpu0);
      const esCpu = (await esCpuMs(es)) - es0;
      const s = summarize(ms);
      const esc = calls.take(ms.length);
      if (measured) latencyOf.get(mode)!.push(...ms);
      return {
        mode,
        seconds: round2(elapsed),
        requests: ms.length,
        throughput: Math.round((ms.length / elapsed) * 10) / 10,
        p50: s.p50,
        p95: s.p95,
        node_cpu_ms_per_request: round2((cpu.user + cpu.system) / 1000 / ms.length),
        es_cpu_ms_per_request: round2(esCpu / ms.length),
        timings_ms: timers.take(ms.length),
        es_calls_per_request: esc.perRequest,
        es_ms_per_call: esc.ms,
      };
    };

    process.stderr.write(`warm-up: ${WARMUP_S} s per mode\n`);
    for (const mode of MODES) await round(mode, WARMUP_S);

    // counterbalanced: on, off, off, on, on, off, … (with variants: each block forwards, then backwards)
    const order: string[] = [];
    for (let k = 0; k < ROUNDS; k++) order.push(...(k % 2 ? [...MODES].reverse() : MODES));
    const rounds: Round[] = [];
    for (const mode of order) {
      const r = await round(mode, ROUND_S, true);
      rounds.push(r);
      process.stderr.write(
        `  ${mode.padEnd(13)} ${r.throughput.toFixed(1).padStart(7)} req/s  p50 ${r.p50} ms  p95 ${r.p95} ms  cpu/req node ${r.node_cpu_ms_per_request} es ${r.es_cpu_ms_per_request} ms  ${JSON.stringify(r.timings_ms)}\n`,
      );
    }
    await setMode('as-is'); // the service as it is

    // every request sent with the real ledger was charged, none with metering off (charges
    // made in the background by the charge-async experiment may still be in flight)
    await new Promise((r) => setTimeout(r, 1000));
    const now = new Date();
    const month = await a.container.ports.ledger.month(
      'bench',
      now.getUTCFullYear(),
      now.getUTCMonth() + 1,
    );
    const charged = month.perDataset.reduce((n, l) => n + l.requests, 0);
    const meteredSent = [...sent.values()].reduce((x, y) => x + y, 0);
    if (charged !== meteredSent)
      process.stderr.write(`WARNING: ${charged} requests charged, ${meteredSent} sent metered\n`);

    /** One mode over all its rounds. */
    const sum = (mode: string) => {
      const rs = rounds.filter((r) => r.mode === mode);
      const n = rs.reduce((x, r) => x + r.requests, 0);
      const weighted = (f: (r: Round) => number) =>
        round2(rs.reduce((x, r) => x + f(r) * r.requests, 0) / n);
      const keys = (f: (r: Round) => Record<string, number>) =>
        Object.fromEntries(
          [...new Set(rs.flatMap((r) => Object.keys(f(r))))]
            .sort()
            .map((k) => [k, weighted((r) => f(r)[k] ?? 0)]),
        );
      return {
        throughput: Math.round((n / rs.reduce((x, r) => x + r.seconds, 0)) * 10) / 10,
        node_cpu_ms_per_request: weighted((r) => r.node_cpu_ms_per_request),
        es_cpu_ms_per_request: weighted((r) => r.es_cpu_ms_per_request),
        timings_ms: keys((r) => r.timings_ms),
        es_calls_per_request: keys((r) => r.es_calls_per_request),
        es_ms_per_call: keys((r) => r.es_ms_per_call),
      };
    };
    const on = sum('on');
    const off = sum('off');
    const ratio = Math.round((on.throughput / off.throughput) * 1000) / 1000;
    // the ratio of each adjacent on/off pair: its spread shows how noisy the machine was
    const pairs: number[] = [];
    const ons = rounds.filter((r) => r.mode === 'on');
    const offs = rounds.filter((r) => r.mode === 'off');
    for (let k = 0; k < Math.min(ons.length, offs.length); k++)
      pairs.push(Math.round((ons[k]!.throughput / offs[k]!.throughput) * 1000) / 1000);
    const lat = (mode: string) => {
      const s = summarize(latencyOf.get(mode)!);
      return { p50: s.p50, p95: s.p95, mean: s.mean };
    };
    const result = {
      benchmark: 'metering-overhead',
      date: new Date().toISOString(),
      machine: machine(),
      setup:
        'two API hosts (APP_ROLES=api) in this process, on one Elasticsearch node (replicas 0) and RabbitMQ; the load clients run in the same process',
      items: ITEMS,
      concurrency: CONCURRENCY,
      round_seconds: ROUND_S,
      rounds_per_mode: ROUNDS,
      warmup_seconds_per_mode: WARMUP_S,
      plan: { credits: { limitType: 'fixed', limit: CREDITS } },
      sample_query: Object.fromEntries(new URLSearchParams(query(0))),
      rounds,
      throughput_on: on.throughput,
      throughput_off: off.throughput,
      ratio,
      // short rounds, many of them: adjacent on/off rounds see the same load from the rest of the machine
      pair_ratios: pairs,
      pair_ratio_median: median(pairs),
      latency_ms: { on: lat('on'), off: lat('off') },
      cpu_ms_per_request: {
        on: { node: on.node_cpu_ms_per_request, elasticsearch: on.es_cpu_ms_per_request },
        off: { node: off.node_cpu_ms_per_request, elasticsearch: off.es_cpu_ms_per_request },
      },
      timings_ms: { on: on.timings_ms, off: off.timings_ms },
      es_calls_per_request: { on: on.es_calls_per_request, off: off.es_calls_per_request },
      es_ms_per_call: { on: on.es_ms_per_call, off: off.es_ms_per_call },
      ...(variants.length
        ? {
            variants: Object.fromEntries(
              variants.map((v) => {
                const x = sum(v);
                return [
                  v,
                  {
                    ...x,
                    ratio_vs_off: Math.round((x.throughput / off.throughput) * 1000) / 1000,
                    latency_ms: lat(v),
                  },
                ];
              }),
            ),
          }
        : {}),
      charged_requests: charged,
      metered_requests_sent: meteredSent,
      goal: GOAL,
      pass: ratio >= GOAL,
      // other work on the machine makes the figures noisy: 1-minute load average at start and end
      load_average: { start: loadStart, end: round2(os.loadavg()[0]!) },
      run_seconds: Math.round((Date.now() - started) / 1000),
    };
    // experiments never replace the measurement of the service as it is
    const file = variants.length
      ? (fs.writeFileSync(
          `${os.tmpdir()}/metering-variants.json`,
          `${JSON.stringify(result, null, 2)}\n`,
        ),
        `${os.tmpdir()}/metering-variants.json`)
      : writeResult('metering', result);
    const l = result.latency_ms;
    process.stdout.write(
      `metering on ${on.throughput} req/s (p50 ${l.on.p50} ms, p95 ${l.on.p95} ms), off ${off.throughput} req/s (p50 ${l.off.p50} ms, p95 ${l.off.p95} ms): ratio ${ratio} (goal ≥ ${GOAL}) ${result.pass ? 'PASS' : 'FAIL'}; median of ${pairs.length} on/off pairs ${median(pairs)}\nwritten to ${file}\n`,
    );
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all(hosts.map((h) => h.stop()));
    for (const h of hosts) fs.rmSync(h.container.config.dataDir, { recursive: true, force: true });
    await es.close();
    await writer.close();
    if (hosts[0]) await deleteInstallation(hosts[0].container.config);
  }
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
