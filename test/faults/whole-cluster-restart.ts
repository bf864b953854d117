/**
 * The second fault of the cluster suite (registered by es-cluster.test.ts, which owns the
 * cluster): every node SIGKILLed at once mid-ingest, down for a while, started again.
 *
 *   - while nothing answers, workers stop taking jobs and put back what they held, uncounted:
 *     nothing reaches the dead-letter queue;
 *   - every acknowledged item is processed within 90 s of Elasticsearch answering again, i.e.
 *     of the first HTTP answer from any node, whatever its status (the workers resume and
 *     re-queue unfinished items at once, not at the 5-minute idle sweep). The clock starts there
 *     rather than when the installation's indices are readable (yellow), because electing a
 *     master and recovering shards is part of what a client waits through; the time from yellow
 *     is reported too;
 *   - none is counted twice.
 */
import type { ChildProcess } from 'node:child_process';
import { OPERATOR, deleteInstallation, waitFor } from '../helpers/app';
import { CLUSTER_SIZE, clusterUrls, health, killNode, startCluster } from '../helpers/es-cluster';
import type { ImageServer } from '../helpers/image-server';
import { freePort, httpClient } from '../helpers/processes';

const ITEMS = 300;
const IMAGE_MS = 300; // slow images keep most of the ingest in flight at the kill
const KILL_AT = 60; // processed items at the kill
const DOWN_MS = 20_000;
const GOAL_MS = 90_000; // issue 14: processed within 90 s of Elasticsearch answering again

export interface ClusterSuite {
  spawn(name: string, extra: Record<string, string>): ChildProcess;
  logTails(): string;
  /** `<queue>=<ready>/<unacked>` for the installation with this AMQP prefix. */
  queueDepths(amqpPrefix: string): Promise<string>;
  image(): ImageServer;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * When a node first answers HTTP after the kill, with any status: nodes are probed in parallel
 * every 100 ms, and `local=true` lets a node answer before a master is elected.
 */
async function firstAnswer(since: number): Promise<number> {
  let answeredAt: number | undefined;
  const probe = async (url: string): Promise<number> => {
    while (answeredAt === undefined) {
      const answered = await fetch(`${url}/_cluster/health?local=true`, {
        signal: AbortSignal.timeout(2000),
      }).then(
        async (r) => {
          await r.arrayBuffer().catch(() => undefined);
          return true;
        },
        () => false,
      );
      if (answered) answeredAt ??= Date.now();
      else if (Date.now() - since > 300_000) throw new Error('no node answered within 300 s');
      else await sleep(100);
    }
    return answeredAt;
  };
  return Promise.race(clusterUrls().map(probe));
}

export function defineWholeClusterRestart(suite: ClusterSuite): void {
  const tag = `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const amqpPrefix = `test.${tag}.`;
  afterAll(async () => {
    if (process.env.ES_CLUSTER_KEEP) return;
    for (const u of clusterUrls()) await deleteInstallation(u, `${tag}-`);
  });

  test('every node SIGKILLed mid-ingest and restarted: nothing dead-lettered, all processed within 90 s of it answering', async () => {
    const env = { ES_INDEX_PREFIX: `${tag}-`, AMQP_QUEUE_PREFIX: amqpPrefix };
    const port = await freePort();
    suite.spawn('restart-api', { ...env, APP_ROLES: 'api', PORT: String(port) });
    const api = httpClient(port);
    await api.up(60_000);
    for (const w of ['restart-worker-1', 'restart-worker-2'])
      suite.spawn(w, { ...env, APP_ROLES: 'worker', WORKER_CONCURRENCY: '3', LOG_LEVEL: 'info' });

    const org = await api.call('POST', '/orgs', OPERATOR, { name: 'acme' });
    expect(org.status).toBe(201);
    const token = org.body.token as string;
    expect((await api.call('POST', '/orgs/acme/datasets', token, { name: 'd' })).status).toBe(201);
    const dsPath = '/orgs/acme/datasets/d';
    const counts = async () => {
      const r = await api
        .call('GET', dsPath, token, undefined, { timeoutMs: 35_000 })
        .catch(() => undefined);
      return r?.status === 200
        ? (r.body.dataset.counts as { items: number; processed: number; pending: number })
        : undefined;
    };

    const img = suite.image();
    for (let b = 0; b < ITEMS; b += 50) {
      const content = Array.from({ length: 50 }, (_, i) => ({
        id: `w${b + i}`,
        url: `${img.url}/delayed/${b + i + 5000}.png?ms=${IMAGE_MS}`,
      }));
      const r = await api.call('POST', `${dsPath}/content`, token, { content });
      expect(r.status).toBe(202);
    }
    await waitFor(
      `${KILL_AT} processed`,
      async () => ((await counts())?.processed ?? 0) >= KILL_AT,
      180_000,
    );
    const atKill = await counts();
    expect(atKill!.pending).toBeGreaterThan(100);

    try {
      await Promise.all(Array.from({ length: CLUSTER_SIZE }, (_, i) => killNode(i + 1)));
      const killedAt = Date.now();
      await sleep(DOWN_MS);
      const restarting = startCluster();
      const answeredAt = await firstAnswer(killedAt);
      // The service can read the installation once every primary shard of it is assigned
      // (yellow); a three-node cluster restarting on two cores may spend a minute or two on
      // that, electing a master and recovering shards.
      const readableAt = await waitFor(
        'the installation readable (yellow)',
        async () => {
          const h = await health(`${tag}-*`, 'wait_for_status=yellow&timeout=1s').catch(
            () => undefined,
          );
          return h && !h.timed_out && h.status !== 'red' ? Date.now() : undefined;
        },
        300_000,
      );
      // The counts that showed it are the ones asserted below. A second read may be answered
      // by the other copy of the item index, which refreshes on its own second and was once
      // still a refresh behind (298 of 300 processed, right after 300).
      let done: Awaited<ReturnType<typeof counts>>;
      await waitFor(
        'every acknowledged item processed',
        async () => {
          done = await counts();
          return done !== undefined && done.processed === ITEMS && done.pending === 0;
        },
        // past the goal, so that a miss is reported with its figures
        GOAL_MS + 90_000,
      );
      const doneAt = Date.now();
      await restarting;
      const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
      console.log(
        `whole cluster down ${secs(answeredAt - killedAt)} at ${JSON.stringify(atKill)}; ` +
          `readable ${secs(readableAt - answeredAt)} after a node first answered; all ${ITEMS} ` +
          `processed ${secs(doneAt - answeredAt)} after the first answer (goal ${secs(GOAL_MS)}), ` +
          `${secs(doneAt - readableAt)} after it was readable; ` +
          `queues ${await suite.queueDepths(amqpPrefix)}`,
      );
      expect(doneAt - answeredAt).toBeLessThanOrEqual(GOAL_MS);
      expect(done).toEqual({ items: ITEMS, processed: ITEMS, pending: 0, errors: 0 });
      // nothing was burnt into the dead-letter queue while the store was away
      expect(await suite.queueDepths(amqpPrefix)).toMatch(/(^| )jobs\.dead=0\/0( |$)/);
      const usage = await waitFor(
        'the image count to settle',
        async () => {
          const u = await api.call('GET', '/orgs/acme/usage', token);
          return u.body?.usage?.images?.processed === ITEMS ? u : undefined;
        },
        15_000,
      ).catch(() => undefined);
      expect(usage?.body.usage.images.processed).toBe(ITEMS);
      expect((await health(`${tag}-*`, 'wait_for_status=yellow&timeout=30s')).status).not.toBe(
        'red',
      );
    } catch (e) {
      console.error(suite.logTails());
      throw e;
    }
  }, 600_000);
}
