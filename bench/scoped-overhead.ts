/**
 * What a scoped token (contract §16) costs a search, against the same search with the dataset
 * token (issue 38): a scoped search costs at most 0.2 ms more at p50, over 10,000 requests.
 * One service per engine, a catalogue whose `brand` takes three values; the modes ask the
 * engine the same thing, so what differs is the token's work (parse, signature, its q resolved
 * and ANDed, `fields` applied, `rate` counted):
 *
 *   dataset          dataset token, q=price:lo:hi,brand:acme (two keys: ANDed, §5)
 *   scoped           scoped token {q:'brand:acme'}, q=price:lo:hi
 *   scoped_fields    the same token with `fields` (the projection and hidden-field rules)
 *   scoped_rate      the same token with a `rate` no run reaches (the shared counter)
 *
 * Every request names the same `fields`, all of them allowed to the `fields` token, so every
 * mode returns the same page; that is checked before measuring. One sequential client (undici,
 * one kept-alive connection) in this process. Rounds of BENCH_ROUND_REQUESTS requests per mode,
 * interleaved and counterbalanced (A B C D D C B A …) so drift and the load of other work on the
 * machine weigh on every mode alike; each mode gets BENCH_REQUESTS requests in all. Besides the
 * p50 / p95 over all requests, the difference to `dataset` is taken in each block of adjacent
 * rounds, and its median reported: the figure least moved by the machine's load. Then the
 * token's own work is timed without HTTP in a micro-loop.
 *
 *   npm run bench:scoped   (BENCH_ITEMS, BENCH_REQUESTS per mode, BENCH_ROUND_REQUESTS,
 *                           BENCH_WARMUP per mode, BENCH_ENGINES)
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { esClient } from 'visual-search-service/dist/adapters/elasticsearch/client';
import { EsIndices } from 'visual-search-service/dist/adapters/elasticsearch/indices';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import { parseQ } from 'visual-search-service/dist/query/parse';
import {
  parseScoped,
  rateKeyOf,
  verifyScoped,
} from 'visual-search-service/dist/services/scoped-tokens';
import { catalogue } from './catalogue';
import {
  ES_URL,
  RESULTS_DIR,
  V2,
  call,
  createDataset,
  deleteInstallation,
  machine,
  median,
  startService,
  summarize,
  writeResult,
  type Engine,
} from './common';
import { DESCRIPTOR_VECTORS, seedElasticsearch, seedEmbedded } from './seed-items';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 5_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 10_000); // per mode
const ROUND_REQUESTS = Number(process.env.BENCH_ROUND_REQUESTS ?? 100);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 500); // per mode
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];
const GOAL_MS = 0.2;
const BRANDS = ['acme', 'globex', 'initech'];
/** Every request asks for these; the `fields` token allows them and no other. */
const FIELDS = ['brand', 'price', 'category', 'color'];
/** A rate no run reaches (the contract's largest), so every request is counted and admitted. */
const RATE = 100_000;

type Mode = 'dataset' | 'scoped' | 'scoped_fields' | 'scoped_rate';
const MODES: Mode[] = ['dataset', 'scoped', 'scoped_fields', 'scoped_rate'];

const round2 = (x: number): number => Math.round(x * 100) / 100;
const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** The bench catalogue with `brand` one of three names, each on a third of the items. */
function* items(n: number): Generator<StoredItem> {
  let i = 0;
  for (const it of catalogue(n))
    yield { ...it, metadata: { ...it.metadata, brand: BRANDS[i++ % BRANDS.length]! } };
}

/** Request i of a mode: the price window, page and order vary; the same i is the same page. */
function query(mode: Mode, i: number): string {
  const lo = 10 + (i % 5) * 2;
  const price = `price:${lo}:${lo + 40}`;
  return new URLSearchParams({
    q: mode === 'dataset' ? `${price},brand:acme` : price,
    sort: 'price',
    order: i % 2 ? 'asc' : 'desc',
    page: String(1 + (i % 4)),
    limit: '24',
    fields: FIELDS.join(','),
  }).toString();
}

/** A scoped token made as the contract says a shop's server makes one, with the key alone. */
function mint(key: string, payload: object): string {
  const p = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `st_${p}.${crypto.createHmac('sha256', key).update(p).digest('base64url')}`;
}

/** µs per call of f, the best of 5 runs of n calls (the machine's load only ever adds). */
function micro(n: number, f: () => unknown): number {
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t = process.hrtime.bigint();
    for (let k = 0; k < n; k++) f();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e3 / n);
  }
  return round3(best);
}

interface Page {
  total_results: number;
  results: Array<{ id: string; explore_url: string; metadata: Record<string, unknown> }>;
}

async function benchEngine(engine: Engine): Promise<Record<string, unknown>> {
  const prefix = `benchscoped${Date.now().toString(36)}-`;
  const loadStart = round2(os.loadavg()[0]!);
  const app = await startService({
    EMBEDDER: 'descriptor',
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: prefix }
      : {}),
  });
  const writer = engine === 'elasticsearch' ? esClient(ES_URL) : undefined;
  const pool = new Pool(app.url!, { connections: 1 });
  try {
    const { orgToken, dsToken, datasetId } = await createDataset(app, 'shoes');
    const t0 = Date.now();
    if (writer)
      await seedElasticsearch(
        new EsIndices(writer, prefix, { shards: 1, replicas: 0 }),
        datasetId,
        ITEMS,
        DESCRIPTOR_VECTORS,
        items(ITEMS),
      );
    else seedEmbedded(app.container.config.dataDir, datasetId, items(ITEMS), DESCRIPTOR_VECTORS);
    process.stderr.write(`[${engine}] loaded ${ITEMS} items in ${(Date.now() - t0) / 1000} s\n`);

    const sk = await call<{ key: string }>(
      app.url!,
      'GET',
      '/orgs/bench/datasets/shoes/scoped-key',
      orgToken,
    );
    if (sk.status !== 200) throw new Error(`scoped-key: ${JSON.stringify(sk.body)}`);
    const payloads: Record<Exclude<Mode, 'dataset'>, object> = {
      scoped: { q: 'brand:acme' },
      scoped_fields: { q: 'brand:acme', fields: FIELDS },
      scoped_rate: { q: 'brand:acme', rate: RATE },
    };
    const tokens: Record<Mode, string> = {
      dataset: dsToken,
      scoped: mint(sk.body.key, payloads.scoped),
      scoped_fields: mint(sk.body.key, payloads.scoped_fields),
      scoped_rate: mint(sk.body.key, payloads.scoped_rate),
    };

    // Timed inside the service, by mode (the instances it holds): the engine's search, the
    // dataset's realtime read (by id for a dataset token, by name for a scoped one), the rate
    // counter; and how long the answer waited for that read after the search was done.
    let current: Mode = 'dataset';
    let measuring = false;
    const inside = new Map<string, number[]>();
    const ends = { search: 0n, read: 0n };
    const timed = <O extends object>(name: string, obj: O, method: keyof O & string): void => {
      const orig = (obj[method] as (...a: unknown[]) => Promise<unknown>).bind(obj);
      Object.assign(obj, {
        [method]: (...args: unknown[]) => {
          const t = process.hrtime.bigint();
          const mode = current;
          const p = orig(...args);
          if (measuring)
            void p.then(
              () => {
                const end = process.hrtime.bigint();
                if (name === 'engine_search') ends.search = end;
                if (name.startsWith('dataset_read')) ends.read = end;
                const k = `${mode}\0${name}`;
                if (!inside.has(k)) inside.set(k, []);
                inside.get(k)!.push(Number(end - t) / 1e6);
              },
              () => undefined,
            );
          return p;
        },
      });
    };
    const ports = app.container.ports;
    timed('engine_search', ports.engine, 'search');
    timed('dataset_read_by_id', ports.accounts, 'getDatasetById');
    timed('dataset_read_by_name', ports.accounts, 'getDataset');
    timed('rate_take', ports.rates, 'take');

    // Elasticsearch requests the service sends, by mode and kind (its own client, observed)
    const esCalls = new Map<Mode, Map<string, number>>(MODES.map((m) => [m, new Map()]));
    if (engine === 'elasticsearch') {
      const ledger = app.container.ports.ledger as unknown as { indices: EsIndices };
      ledger.indices.client.diagnostic.on('response', (_err, r) => {
        const req = r?.meta.request.params;
        if (!measuring || !req) return;
        const [index = '', api = ''] = decodeURIComponent(req.path.split('?')[0]!)
          .split('/')
          .slice(1);
        const name = index.replace(prefix, '').replace(/^items-.*/, 'items');
        const k = `${req.method} ${api ? `${name}/${api}` : name}`;
        const byKind = esCalls.get(current)!;
        byKind.set(k, (byKind.get(k) ?? 0) + 1);
      });
    }

    const get = async (mode: Mode, i: number): Promise<Page> => {
      current = mode;
      const r = await pool.request({
        method: 'GET',
        path: `/orgs/bench/datasets/shoes/search?${query(mode, i)}`,
        headers: { accept: V2, authorization: `token ${tokens[mode]}` },
      });
      const body = (await r.body.json()) as Page;
      if (r.statusCode !== 200 || !body.results?.length)
        throw new Error(`search (${mode}): ${r.statusCode} ${JSON.stringify(body).slice(0, 300)}`);
      return body;
    };

    // every mode answers the same page: same ids, same total, same metadata
    const checked: Record<string, unknown> = {};
    for (let i = 0; i < 20; i++) {
      const [base, ...others] = await Promise.all(MODES.map((m) => get(m, i)));
      // explore_url carries the client's own q, which differs by design
      const key = (p: Page) =>
        JSON.stringify([p.total_results, p.results.map((r) => [r.id, r.metadata])]);
      others.forEach((o, k) => {
        if (key(o) !== key(base!))
          throw new Error(
            `${MODES[k + 1]} answers request ${i} otherwise than dataset: ${key(o).slice(0, 300)} against ${key(base!).slice(0, 300)}`,
          );
      });
      if (i === 0)
        Object.assign(checked, {
          total_results: base!.total_results,
          first_ids: base!.results.slice(0, 3).map((r) => r.id),
          metadata_keys: Object.keys(base!.results[0]!.metadata).sort(),
        });
    }
    process.stderr.write(`[${engine}] all modes answer alike: ${JSON.stringify(checked)}\n`);

    let seq = 0;
    const runRound = async (mode: Mode, n: number, into?: number[]): Promise<void> => {
      for (let k = 0; k < n; k++) {
        const i = seq++;
        ends.search = ends.read = 0n;
        const t = process.hrtime.bigint();
        await get(mode, i);
        into?.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (measuring && ends.search && ends.read) {
          const k = `${mode}\0read_outlasted_search`;
          if (!inside.has(k)) inside.set(k, []);
          inside.get(k)!.push(Math.max(0, Number(ends.read - ends.search) / 1e6));
        }
      }
    };
    for (const mode of MODES) await runRound(mode, WARMUP);

    // counterbalanced: A B C D, D C B A, A B C D, …
    const blocks = Math.ceil(REQUESTS / ROUND_REQUESTS);
    const times = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
    const blockP50 = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
    const loads: number[] = [];
    measuring = true;
    const begin = Date.now();
    for (let b = 0; b < blocks; b++) {
      const n = Math.min(ROUND_REQUESTS, REQUESTS - b * ROUND_REQUESTS);
      for (const mode of b % 2 ? [...MODES].reverse() : MODES) {
        const ms: number[] = [];
        await runRound(mode, n, ms);
        times.get(mode)!.push(...ms);
        blockP50.get(mode)!.push(summarize(ms).p50);
      }
      if (b % 10 === 0) {
        loads.push(round2(os.loadavg()[0]!));
        process.stderr.write(
          `[${engine}] block ${b}/${blocks}: ${MODES.map((m) => `${m} ${blockP50.get(m)!.at(-1)}`).join('  ')} ms (load ${loads.at(-1)})\n`,
        );
      }
    }
    measuring = false;
    const seconds = (Date.now() - begin) / 1000;

    const latency = Object.fromEntries(MODES.map((m) => [m, summarize(times.get(m)!)]));
    const base = latency.dataset!;
    const blockDiffs = (m: Mode) =>
      blockP50.get(m)!.map((x, b) => round3(x - blockP50.get('dataset')![b]!));
    const vsDataset = Object.fromEntries(
      MODES.filter((m) => m !== 'dataset').map((m) => {
        const diffs = blockDiffs(m);
        const sorted = [...diffs].sort((x, y) => x - y);
        return [
          m,
          {
            p50_ms: round2(latency[m]!.p50 - base.p50),
            p95_ms: round2(latency[m]!.p95 - base.p95),
            mean_ms: round2(latency[m]!.mean - base.mean),
            block_p50_diff_median_ms: median(diffs),
            // the middle half of the blocks' differences: how much the machine moved them
            block_p50_diff_iqr_ms: [
              sorted[Math.floor(sorted.length / 4)]!,
              sorted[Math.floor((3 * sorted.length) / 4)]!,
            ],
          },
        ];
      }),
    );
    const insideMs = Object.fromEntries(
      MODES.map((m) => [
        m,
        Object.fromEntries(
          [...inside]
            .filter(([k]) => k.startsWith(`${m}\0`))
            .map(([k, ms]) => {
              const s = summarize(ms);
              return [k.split('\0')[1]!, { n: s.n, p50: s.p50, p95: s.p95, mean: s.mean }];
            })
            .sort(([a], [b]) => String(a).localeCompare(String(b))),
        ),
      ]),
    );

    const esCallsPerRequest =
      engine === 'elasticsearch'
        ? Object.fromEntries(
            MODES.map((m) => [
              m,
              Object.fromEntries(
                [...esCalls.get(m)!]
                  .sort(([a], [b]) => a.localeCompare(b))
                  .map(([k, n]) => [k, round3(n / times.get(m)!.length)]),
              ),
            ]),
          )
        : undefined;

    // the token's own work without HTTP, on this process's code (dist/)
    const st = tokens.scoped_rate;
    const parsed = parseScoped(st)!;
    const N = 20_000;
    const tokenMicroUs = {
      parse: micro(N, () => parseScoped(st)),
      verify_signature: micro(N, () => verifyScoped(parsed, sk.body.key)),
      parse_and_verify: micro(N, () => verifyScoped(parseScoped(st)!, sk.body.key)),
      parse_q_brand_acme: micro(N, () => parseQ('brand:acme')),
      rate_key: micro(N, () => rateKeyOf(parsed, datasetId)),
    };

    const scoped = vsDataset.scoped as { p50_ms: number; block_p50_diff_median_ms: number };
    return {
      engine,
      date: new Date().toISOString(),
      items: ITEMS,
      requests_per_mode: REQUESTS,
      measure_seconds: Math.round(seconds),
      identical_answers: checked,
      latency_ms: latency,
      vs_dataset_ms: vsDataset,
      // read_outlasted_search: how long the answer waited for the dataset's realtime read
      // once the engine had answered (0 when the read came first)
      inside_service_ms: insideMs,
      ...(esCallsPerRequest ? { es_calls_per_request: esCallsPerRequest } : {}),
      token_micro_us: tokenMicroUs,
      goal_ms: GOAL_MS,
      met: scoped.p50_ms <= GOAL_MS,
      // one-minute load average of the machine (2 cores): at start, every 10th block, at end
      load_average: { start: loadStart, during: loads, end: round2(os.loadavg()[0]!) },
    };
  } finally {
    await pool.close();
    await writer?.close();
    await app.stop();
    await deleteInstallation(app.container.config);
  }
}

async function main(): Promise<void> {
  const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8' }).trim();
  const runs: Array<Record<string, unknown>> = [];
  for (const engine of ENGINES)
    runs.push({
      ...(await benchEngine(engine)),
      commit: git('rev-parse', '--short', 'HEAD'),
      // changes in src/ not yet committed when this ran (they are in the measured build)
      uncommitted_src: git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean),
    });
  // Measuring one engine keeps the other's last run (each run has its date).
  const previous = path.join(RESULTS_DIR, 'scoped-overhead.json');
  if (fs.existsSync(previous))
    for (const old of (JSON.parse(fs.readFileSync(previous, 'utf8')) as { runs: typeof runs }).runs)
      if (!runs.some((r) => r.engine === old.engine)) runs.push(old);
  const result = {
    benchmark: 'scoped-overhead',
    date: new Date().toISOString(),
    machine: { ...machine(), hostname: os.hostname() },
    parameters: {
      items: ITEMS,
      brands: BRANDS,
      requests_per_mode: REQUESTS,
      round_requests: ROUND_REQUESTS,
      warmup_per_mode: WARMUP,
      order: 'blocks of one round per mode, forwards then backwards (A B C D D C B A …)',
      question: {
        dataset: `GET search?${query('dataset', 0)}`,
        scoped: `GET search?${query('scoped', 0)}`,
      },
      tokens: {
        scoped: { q: 'brand:acme' },
        scoped_fields: { q: 'brand:acme', fields: FIELDS },
        scoped_rate: { q: 'brand:acme', rate: RATE },
      },
      goal: `scoped p50 − dataset p50 ≤ ${GOAL_MS} ms`,
    },
    note: 'one sequential client (one kept-alive undici connection) in the same process as the service, on the same 2-core machine as Elasticsearch and any other work; inside_service_ms times the port calls in the service (engine search, dataset read, rate counter) per mode; token_micro_us is the best of 5 loops of 20,000 calls',
    runs,
  };
  const file = writeResult('scoped-overhead', result);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
