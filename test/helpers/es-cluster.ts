/**
 * The local three-node Elasticsearch cluster of scripts/services.sh (cluster-up, cluster-kill N,
 * cluster-start N, cluster-down) for fault tests: nodes vss-cluster-1..3 on 127.0.0.1:9201-9203.
 * The script runs asynchronously, so requests a test keeps sending while a node is killed or
 * restarted are not held up by it.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT } from './processes';

const SCRIPT = path.join(ROOT, 'scripts/services.sh');
export const CLUSTER_SIZE = 3;
const HTTP_BASE = Number(process.env.ES_CLUSTER_HTTP_BASE ?? 9200);

const nodeUrl = (n: number): string => `http://127.0.0.1:${HTTP_BASE + n}`;
export const nodeName = (n: number): string => `vss-cluster-${n}`;
export const clusterUrls = (): string[] =>
  Array.from({ length: CLUSTER_SIZE }, (_, i) => nodeUrl(i + 1));

/** Runs `scripts/services.sh <args>`; rejects with everything it printed when it fails. */
function services(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`scripts/services.sh ${args.join(' ')} exited with ${code}:\n${out}`));
    });
  });
}

export const startCluster = (): Promise<string> => services('cluster-up');
export const stopCluster = (): Promise<string> => services('cluster-down');
/** SIGKILLs node n (1-based). */
export const killNode = (n: number): Promise<string> => services('cluster-kill', String(n));
/** Starts node n again and resolves once the cluster lists it. */
export const startNode = (n: number): Promise<string> => services('cluster-start', String(n));

async function getJson(url: string): Promise<any> {
  const r = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!r.ok) throw new Error(`GET ${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** Asks the first node that answers. */
export async function ask(p: string, nodes = clusterUrls()): Promise<any> {
  let last: unknown;
  for (const base of nodes) {
    try {
      return await getJson(base + p);
    } catch (e) {
      last = e;
    }
  }
  throw last;
}

export async function nodeNames(nodes?: string[]): Promise<string[]> {
  const rows = (await ask('/_cat/nodes?format=json&h=name', nodes)) as Array<{ name: string }>;
  return rows.map((r) => r.name).sort();
}

export async function masterName(nodes?: string[]): Promise<string> {
  const rows = (await ask('/_cat/master?format=json', nodes)) as Array<{ node: string }>;
  return rows[0]!.node;
}

export async function health(
  indices = '',
  params = '',
  nodes?: string[],
): Promise<{ status: string; number_of_nodes: number; timed_out: boolean }> {
  return ask(`/_cluster/health/${indices}?${params}`, nodes);
}

export interface ShardRow {
  index: string;
  shard: string;
  prirep: 'p' | 'r';
  state: string;
  node: string | null;
}

export async function shards(pattern: string, nodes?: string[]): Promise<ShardRow[]> {
  return ask(`/_cat/shards/${pattern}?format=json&h=index,shard,prirep,state,node`, nodes);
}

export async function replicasOf(pattern: string): Promise<Record<string, string>> {
  const rows = (await ask(`/_cat/indices/${pattern}?format=json&h=index,rep`)) as Array<{
    index: string;
    rep: string;
  }>;
  return Object.fromEntries(rows.map((r) => [r.index, r.rep]));
}

/**
 * The node (1-based) that holds the most primary shards of `pattern`, each weighted by
 * `weight(index)` (default 1); the elected master breaks ties.
 */
export async function busiestPrimaryNode(
  pattern: string,
  weight: (index: string) => number = () => 1,
): Promise<number> {
  const rows = await shards(pattern);
  const master = await masterName();
  const score = (n: number): number =>
    rows
      .filter((r) => r.prirep === 'p' && r.node === nodeName(n))
      .reduce((sum, r) => sum + weight(r.index) * 2, 0) + (master === nodeName(n) ? 1 : 0);
  let best = 1;
  for (let n = 2; n <= CLUSTER_SIZE; n++) if (score(n) > score(best)) best = n;
  return best;
}
