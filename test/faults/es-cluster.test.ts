/**
 * Fault test on a three-node Elasticsearch cluster (scripts/services.sh cluster-up), every index
 * with one replica: an API process and two workers (dist/main.js) are given all three nodes in
 * ELASTICSEARCH_URL; while 300 items are ingested and searches run in a loop, the node holding
 * the most primary shards of the installation (the ledgers' and the item index's weigh most) is
 * SIGKILLed after 200 items were posted and 100 processed; the last 100 items are posted while
 * it is down, and it stays down until the dataset is ready (200 processed) and searches were
 * answered with results; then it is started again.
 *
 *   - every item that got a 202 ends processed (none lost, none counted twice);
 *   - every answer during the whole run is 2xx, 409 dataset_not_ready while fewer than 200 items
 *     were processed, or 503 with Retry-After (or 429 with Retry-After, the test's own pace) —
 *     never a 500, never an answer later than 35 s;
 *   - the restarted node rejoins: three nodes, health not red.
 *
 * Then the whole cluster is SIGKILLed and restarted (./whole-cluster-restart.ts).
 *
 * Slow (a cluster start, a node restart, a cluster restart, 2 × 300 images): five to eight
 * minutes on two cores.
 * ES_CLUSTER_KEEP=1 keeps the cluster and the installation's indices after the run.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { OPERATOR, deleteInstallation, tempDir, waitFor } from '../helpers/app';
import {
  ask,
  busiestPrimaryNode,
  clusterUrls,
  health,
  killNode,
  masterName,
  nodeName,
  nodeNames,
  replicasOf,
  shards,
  startCluster,
  startNode,
  stopCluster,
} from '../helpers/es-cluster';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { defineWholeClusterRestart } from './whole-cluster-restart';
import { buildDist, freePort, httpClient, spawnService, stopProcess } from '../helpers/processes';

const ITEMS = 300;
const BATCH = 25;
const IMAGE_MS = 150; // each image answers after this long, so ingestion spans the fault
const BEFORE_KILL = 200; // items posted before the kill; the other 100 are posted with a node down
const KILL_AT = 100; // processed items at the kill
const DOWN_MS = 20_000; // the node stays down at least this long ...
const MAX_DOWN_MS = 150_000; // ... and until searches were answered from a ready dataset, or this
const BOUND_MS = 35_000; // the service's Elasticsearch request timeout is 30 s
const READY_AT = 200; // contract §2: dataset_not_ready below 200 processed items

const tag = `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const dir = tempDir('vss-escluster-');
const URLS = clusterUrls();
const env = {
  SEARCH_BACKEND: 'elasticsearch',
  ELASTICSEARCH_URL: URLS.join(','),
  ELASTICSEARCH_SHARDS: '1',
  ELASTICSEARCH_REPLICAS: '1',
  ES_INDEX_PREFIX: `${tag}-`,
  QUEUE: 'rabbitmq',
  AMQP_QUEUE_PREFIX: `test.${tag}.`,
};

let img: ImageServer | undefined;
let clusterStarted = false; // cluster-up succeeded
const children: Array<{ name: string; child: ChildProcess }> = [];

beforeAll(async () => {
  buildDist();
  img = await startImageServer();
  await startCluster(); // rejects with the script's output when the cluster does not come up
  clusterStarted = true;
}, 300_000);

afterAll(async () => {
  await Promise.all(
    children.map(async ({ child }) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await stopProcess(child, 'SIGTERM');
      clearTimeout(timer);
    }),
  );
  await img?.close();
  // ES_CLUSTER_KEEP=1 leaves the cluster running with the installation's indices, to study a
  // failed run (stop it later with scripts/services.sh cluster-down)
  if (process.env.ES_CLUSTER_KEEP) return;
  if (clusterStarted) for (const u of URLS) await deleteInstallation(u, `${tag}-`);
  await stopCluster(); // also the nodes of a cluster-up that failed half-way
}, 120_000);

function spawn(name: string, extra: Record<string, string>): ChildProcess {
  const child = spawnService(dir, name, { ...env, ...extra });
  children.push({ name, child });
  return child;
}

/** The last lines of every spawned process's log, for a failure message. */
function logTails(lines = 40): string {
  return children
    .map(({ name }) => {
      const f = path.join(dir, `${name}.log`);
      const text = fs.existsSync(f) ? fs.readFileSync(f, 'utf8').trimEnd().split('\n') : [];
      return `--- ${f} (${text.length} lines)\n${text.slice(-lines).join('\n')}`;
    })
    .join('\n');
}

interface Answer {
  status: number; // 0: no answer (connection error or past the bound)
  retryAfter: string | null;
  code?: string;
  body: any;
  ms: number;
  error?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Phase = 'before' | 'down' | 'rejoining' | 'after';
let phase: Phase = 'before';
const started = Date.now();
const t = (): string => `${((Date.now() - started) / 1000).toFixed(1)}s`;
/** Answers per `<phase> <what> <status>`, printed at the end. */
const tally = new Map<string, number>();
const violations: string[] = [];
/** 503 and 429 answers (allowed, but worth reading when the run is studied). */
const notes: string[] = [];
/** Every 10 s: dataset counts and the installation's queue depths. */
const timeline: string[] = [];
let processedSeen = 0;
let lastCounts = '';
/**
 * Set when the installation's work queue vanished from the broker mid-run. The production
 * project's globalSetup/globalTeardown (test/setup/cleanup.js) deletes every `test.*` queue, so
 * a second jest run started meanwhile takes this run's queues away: fail at once and say so.
 */
let queuesGone = '';
const checkQueues = (): void => {
  if (queuesGone) throw new Error(queuesGone);
};

/** messages ready/unacked per queue of an installation, from the local broker. */
function queueDepths(prefix = `test.${tag}.`): Promise<string> {
  return new Promise((resolve) => {
    execFile(
      'rabbitmqctl',
      ['-q', 'list_queues', 'name', 'messages_ready', 'messages_unacknowledged'],
      { timeout: 10_000 },
      (err, out) => {
        if (err) return resolve('?');
        resolve(
          out
            .split('\n')
            .filter((l) => l.startsWith(prefix))
            .map((l) => {
              const [name, ready, unacked] = l.split('\t');
              return `${name!.slice(prefix.length)}=${ready}/${unacked}`;
            })
            .sort()
            .join(' '),
        );
      },
    );
  });
}

test('a node SIGKILLed mid-ingest: nothing lost, no 500, searches answer, the node rejoins', async () => {
  const port = await freePort();
  spawn('api', { APP_ROLES: 'api', PORT: String(port) });
  const api = httpClient(port);
  await api.up(60_000);
  spawn('worker-1', { APP_ROLES: 'worker', WORKER_CONCURRENCY: '3', LOG_LEVEL: 'info' });
  spawn('worker-2', { APP_ROLES: 'worker', WORKER_CONCURRENCY: '3', LOG_LEVEL: 'info' });

  /** An answer with how long it took; a transport failure or a hang past BOUND_MS is status 0. */
  const call = async (method: string, p: string, token: string, body?: unknown) => {
    const t0 = Date.now();
    try {
      const r = await api.call(method, p, token, body, { timeoutMs: BOUND_MS });
      return {
        status: r.status,
        retryAfter: r.headers.get('retry-after'),
        code: r.body?.error?.code,
        body: r.body,
        ms: Date.now() - t0,
      } as Answer;
    } catch (e) {
      return { status: 0, retryAfter: null, body: null, ms: Date.now() - t0, error: String(e) };
    }
  };

  /** Records an answer and flags every one the contract does not allow. */
  const judge = (what: string, a: Answer, processedBefore: number): void => {
    const key = `${phase} ${what} ${a.status}${a.code ? ` ${a.code}` : ''}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
    const ok =
      (a.status >= 200 && a.status < 300) ||
      (a.status === 409 && a.code === 'dataset_not_ready' && processedBefore < READY_AT) ||
      (a.status === 503 && a.code === 'unavailable' && !!a.retryAfter) ||
      // the client's own pace, not the fault's doing
      (a.status === 429 && !!a.retryAfter);
    if (ok && (a.status === 503 || a.status === 429) && notes.length < 30)
      notes.push(
        `${t()} [${phase}] ${what}: ${a.status} after ${a.ms} ms, Retry-After=${a.retryAfter}` +
          ` ${JSON.stringify(a.body)?.slice(0, 200)}`,
      );
    if (!ok)
      violations.push(
        `${t()} [${phase}] ${what}: ${a.status || a.error} after ${a.ms} ms` +
          `${a.status === 503 ? ` Retry-After=${a.retryAfter}` : ''}` +
          ` (processed seen before: ${processedBefore}) ${JSON.stringify(a.body)?.slice(0, 300)}`,
      );
  };

  // org, dataset; every index of the installation must have its replica before the fault
  const org = await call('POST', '/orgs', OPERATOR, { name: 'acme' });
  expect(org.status).toBe(201);
  const orgToken = org.body.token as string;
  const ds = await call('POST', '/orgs/acme/datasets', orgToken, { name: 'd' });
  expect(ds.status).toBe(201);
  const dsToken = ds.body.dataset.browse_token as string;
  const dsPath = '/orgs/acme/datasets/d';

  const counts = async () => {
    const before = processedSeen;
    const a = await call('GET', dsPath, orgToken);
    judge('counts', a, before);
    if (a.status !== 200) return undefined;
    const c = a.body.dataset.counts as {
      items: number;
      processed: number;
      pending: number;
      errors: number;
    };
    processedSeen = Math.max(processedSeen, c.processed);
    lastCounts = JSON.stringify(c);
    return c;
  };

  let stopLoops = false;
  const searchLoop = async (k: number) => {
    for (let i = 0; !stopLoops; i++) {
      const before = processedSeen;
      const a = await call('GET', `${dsPath}/search?limit=10&page=${1 + ((i + k) % 3)}`, dsToken);
      judge('search', a, before);
      // a ready dataset has at least 30 processed items: pages 1-3 of 10 are never empty
      if (a.status === 200 && !(a.body.results?.length > 0))
        violations.push(`${t()} [${phase}] search: 200 without results ${JSON.stringify(a.body)}`);
      await sleep(250); // two loops stay well under the per-token rate limit (1200/min)
    }
  };
  const countLoop = async () => {
    while (!stopLoops) {
      await counts();
      await sleep(500);
    }
  };
  const progress = async () => {
    let seen = false;
    while (!stopLoops) {
      const depths = await queueDepths();
      timeline.push(`${t()} [${phase}] ${lastCounts} queues ${depths}`);
      if (/(^| )jobs=/.test(depths)) seen = true;
      else if (seen && depths !== '?')
        queuesGone =
          `the queues test.${tag}.* were deleted from the broker at ${t()} — by another jest ` +
          'run of the production project (test/setup/cleanup.js deletes every test.* queue)?';
      for (let i = 0; i < 40 && !stopLoops; i++) await sleep(250);
    }
  };
  const loops = [searchLoop(0), searchLoop(1), countLoop(), progress()];

  const acked: string[] = [];
  const postBatch = async (ids: string[]): Promise<void> => {
    const content = ids.map((id) => ({
      id,
      url: `${img!.url}/delayed/${id.replace(/\D/g, '')}.png?ms=${IMAGE_MS}`,
    }));
    for (let attempt = 1; attempt <= 30; attempt++) {
      const a = await call('POST', `${dsPath}/content`, orgToken, { content });
      judge('post', a, processedSeen);
      if (a.status === 202) {
        acked.push(...ids);
        return;
      }
      if (a.status !== 503) return; // judged above
      await sleep(Math.min(Number(a.retryAfter) * 1000 || 1000, 5000));
    }
  };

  const ids = Array.from({ length: ITEMS }, (_, i) => `e${i + 1000}`);
  const batches: string[][] = [];
  for (let b = 0; b < ids.length; b += BATCH) batches.push(ids.slice(b, b + BATCH));
  let victim = 0;
  let killedAt: number;
  let faultInfo = '';
  try {
    // the first batches, before the fault
    for (const b of batches.slice(0, BEFORE_KILL / BATCH)) {
      await postBatch(b);
      await sleep(300);
    }
    await waitFor(
      `${KILL_AT} items processed`,
      async () => {
        checkQueues();
        return processedSeen >= KILL_AT;
      },
      180_000,
    );

    const pattern = `${tag}-*`;
    const before = await health(pattern, 'wait_for_status=green&timeout=60s');
    expect(before.status).toBe('green');
    const reps = await replicasOf(pattern);
    expect(Object.keys(reps).length).toBeGreaterThan(0);
    // ELASTICSEARCH_REPLICAS=1 reached every index the installation created
    expect(Object.entries(reps).filter(([, r]) => r !== '1')).toEqual([]);

    // the ledgers (image counts, image allowance places, credits) and the item index matter most
    victim = await busiestPrimaryNode(pattern, (index) =>
      /-(images|image-holds|credits)$/.test(index) ? 4 : index.includes('-items-') ? 3 : 1,
    );
    const primaries = (await shards(pattern))
      .filter((s) => s.prirep === 'p' && s.node === nodeName(victim))
      .map((s) => s.index);
    const master = await masterName();
    const c = await counts();
    expect(c?.pending).toBeGreaterThan(0); // the kill really happens mid-ingest
    faultInfo =
      `killed ${nodeName(victim)} at ${t()} (master: ${master}; primaries there: ` +
      `${primaries.join(', ') || 'none'}); acked ${acked.length}, counts ${JSON.stringify(c)}`;
    console.log(faultInfo);
    await killNode(victim);
    killedAt = Date.now();
    phase = 'down';

    // the rest of the ingest happens with one node down
    for (const b of batches.slice(BEFORE_KILL / BATCH)) {
      await postBatch(b);
      await sleep(300);
    }
    const searchedDown = () => tally.get('down search 200') ?? 0;
    while (
      Date.now() - killedAt < MAX_DOWN_MS &&
      (Date.now() - killedAt < DOWN_MS || processedSeen < READY_AT || searchedDown() < 10)
    ) {
      checkQueues();
      await sleep(250);
    }
    const others = clusterUrls().filter((_, i) => i + 1 !== victim);
    expect((await nodeNames(others)).length).toBe(2);

    phase = 'rejoining';
    const restartAt = Date.now();
    await startNode(victim);
    console.log(
      `${nodeName(victim)} down for ${((restartAt - killedAt) / 1000).toFixed(1)} s, ` +
        `rejoined after ${((Date.now() - restartAt) / 1000).toFixed(1)} s`,
    );
    phase = 'after';
    // searches go on while the rejoined node recovers its replicas
    const recovered = await health(`${tag}-*`, 'wait_for_status=green&timeout=30s');
    timeline.push(`${t()} [after] health ${recovered.status} after the rejoin`);

    await waitFor(
      'every acknowledged item processed',
      async () => {
        checkQueues();
        const c = await counts();
        return c !== undefined && c.pending === 0 && c.items >= acked.length;
      },
      240_000,
    );
  } catch (e) {
    console.error(`${faultInfo}\n${logTails()}`);
    throw e;
  } finally {
    stopLoops = true;
    await Promise.all(loops);
    console.log(
      `answers by phase (${t()}):\n` +
        [...tally.entries()]
          .sort()
          .map(([k, n]) => `  ${k}: ${n}`)
          .join('\n') +
        `\nprogress:\n  ${timeline.join('\n  ')}` +
        (notes.length ? `\n503/429 answers (first 30):\n  ${notes.join('\n  ')}` : '') +
        (violations.length ? `\nviolations:\n  ${violations.slice(0, 30).join('\n  ')}` : ''),
    );
  }

  try {
    expect(violations).toEqual([]);
    expect(acked).toHaveLength(ITEMS);
    const c = await counts();
    expect(c).toEqual({ items: ITEMS, processed: ITEMS, pending: 0, errors: 0 });
    const listed = await call('GET', `${dsPath}/content?limit=1000`, orgToken);
    expect(listed.status).toBe(200);
    const processed = new Set(
      (listed.body.content as Array<{ id: string; processed: boolean }>)
        .filter((e) => e.processed)
        .map((e) => e.id),
    );
    expect(acked.filter((id) => !processed.has(id))).toEqual([]);
    // every processed image counted once: none lost with the node, none twice by a redelivery
    let imagesCounted: unknown;
    await waitFor(
      'usage.images.processed to settle',
      async () => {
        const usage = await call('GET', '/orgs/acme/usage', orgToken);
        imagesCounted = usage.body?.usage?.images?.processed;
        return imagesCounted === ITEMS;
      },
      15_000,
    ).catch(() => undefined);
    expect(imagesCounted).toBe(ITEMS);
    // the searches really ran on the ready dataset while the node was down, and found items
    expect(tally.get('down search 200') ?? 0).toBeGreaterThanOrEqual(10);

    // the killed node is back: three nodes, health not red (yellow while its replicas recover)
    expect(await nodeNames()).toEqual([1, 2, 3].map(nodeName));
    const after = await health(`${tag}-*`, 'wait_for_status=green&timeout=60s');
    console.log(`health after the restart: ${after.status}`);
    expect(after.status).not.toBe('red');
    expect(after.number_of_nodes).toBe(3);
  } catch (e) {
    console.error(`${faultInfo}\n${await diagnostics(acked)}\n${logTails()}`);
    throw e;
  }
}, 600_000);

defineWholeClusterRestart({ spawn, logTails, queueDepths, image: () => img! });

/** The installation's indices, and which acknowledged items have no counted image. */
async function diagnostics(acked: string[]): Promise<string> {
  const out: string[] = [];
  try {
    const rows = (await ask(
      `/_cat/indices/${tag}-*?format=json&h=index,health,pri,rep,docs.count&s=index`,
    )) as Array<Record<string, string>>;
    out.push('indices:', ...rows.map((r) => `  ${Object.values(r).join(' ')}`));
    // the image ledger's documents carry item_id (src/adapters/elasticsearch/es-usage-ledger.ts)
    await fetch(`${URLS[1]}/${tag}-images/_refresh`, { method: 'POST' });
    const r = await fetch(`${URLS[1]}/${tag}-images/_search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ size: 1000, _source: ['item_id'] }),
    });
    const hits = ((await r.json()) as any).hits?.hits ?? [];
    const counted = new Map<string, number>();
    for (const h of hits) counted.set(h._source.item_id, (counted.get(h._source.item_id) ?? 0) + 1);
    out.push(
      `image ledger: ${hits.length} documents; acknowledged items without one: ` +
        `${JSON.stringify(acked.filter((id) => !counted.has(id)))}; counted twice: ` +
        `${JSON.stringify([...counted].filter(([, n]) => n > 1).map(([id]) => id))}`,
    );
  } catch (e) {
    out.push(`(diagnostics failed: ${String(e)})`);
  }
  return out.join('\n');
}
