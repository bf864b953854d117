/**
 * A RabbitMQ node of a test's own (scripts/services.sh broker-fault-*), to stop, SIGKILL and
 * start again mid-run: the shared broker on 5672 serves the suites running in parallel.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, freePort } from './processes';

const SCRIPT = path.join(ROOT, 'scripts/services.sh');

interface Consumer {
  queue: string;
  /** The OS process whose AMQP connection carries the consumer (undefined if not found). */
  pid?: number;
  connection: string;
}

export interface FaultBroker {
  port: number;
  url: string;
  /**
   * SIGKILL of the node: its quorum queues recover from their fsynced logs at the next start.
   * Not a queue declared within about a second of the kill: RabbitMQ 3.10 (Ra 2.2) has not yet
   * written its name to disk and brings it back empty and leaderless, refusing every publish.
   */
  kill(): Promise<void>;
  /** A clean stop of the node. */
  stop(): Promise<void>;
  /** Starts the node on its data and resolves once it has booted. */
  start(): Promise<void>;
  /** Stops the node and deletes its data. */
  down(): Promise<void>;
  /** `rabbitmqctl -q <args>` on this node, without table headers; one array per row. */
  ctl(...args: string[]): Promise<string[][]>;
  /** Consumers of the queues whose names start with `prefix`, each traced to its process. */
  consumers(prefix: string): Promise<Consumer[]>;
  logTail(lines?: number): string;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(out)
        : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${out}${err}`)),
    );
  });
}

const rows = (out: string): string[][] =>
  out
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => l.split('\t'));

/** Local TCP port → the pid of the process that owns it, for loopback connections to `port`. */
function socketOwners(port: number): Promise<Map<number, number>> {
  return new Promise((resolve) => {
    execFile('ss', ['-tnpH', 'dst', `127.0.0.1:${port}`], (err, out) => {
      const owners = new Map<number, number>();
      if (err) return resolve(owners);
      for (const line of out.split('\n')) {
        const m = /127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:\d+.*pid=(\d+)/.exec(line);
        if (m) owners.set(Number(m[1]), Number(m[2]));
      }
      resolve(owners);
    });
  });
}

export async function startFaultBroker(): Promise<FaultBroker> {
  const port = await freePort();
  const env = {
    ...process.env,
    BROKER_FAULT_PORT: String(port),
    BROKER_FAULT_DIST_PORT: String(await freePort()),
  };
  const services = (...args: string[]) => run('bash', [SCRIPT, ...args], env);
  const ctl = async (...args: string[]) =>
    rows(await services('broker-fault-ctl', '-q', '--timeout', '30', ...args));
  const dir = path.join(
    process.env.VSS_SERVICES_DIR ?? path.join(ROOT, '.cache/services'),
    `rabbitmq-fault-${port}`,
  );
  // a node that failed half-way through its boot must not outlive the test
  await services('broker-fault-up').catch(async (e: unknown) => {
    await services('broker-fault-down').catch(() => undefined);
    throw e;
  });
  return {
    port,
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    kill: () => services('broker-fault-kill').then(() => undefined),
    stop: () => services('broker-fault-stop').then(() => undefined),
    start: () => services('broker-fault-start').then(() => undefined),
    down: () => services('broker-fault-down').then(() => undefined),
    ctl,
    async consumers(prefix) {
      const consumers = (
        await ctl('list_consumers', '--no-table-headers', 'queue_name', 'channel_pid')
      ).filter(([q]) => q!.startsWith(prefix));
      const channels = new Map(
        (await ctl('list_channels', '--no-table-headers', 'pid', 'connection')).map(
          ([ch, conn]) => [ch!, conn!],
        ),
      );
      const peerPorts = new Map(
        (await ctl('list_connections', '--no-table-headers', 'pid', 'peer_port')).map(
          ([conn, p]) => [conn!, Number(p)],
        ),
      );
      const owners = await socketOwners(port);
      return consumers.map(([queue, channel]) => {
        const connection = channels.get(channel!) ?? `?${channel}`;
        return { queue: queue!, connection, pid: owners.get(peerPorts.get(connection) ?? -1) };
      });
    },
    logTail(lines = 30) {
      return ['start.out', `vss-fault-${port}@localhost.log`]
        .map((f) => path.join(dir, 'log', f))
        .filter((f) => fs.existsSync(f))
        .map(
          (f) =>
            `--- ${f}\n${fs.readFileSync(f, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`,
        )
        .join('\n');
    },
  };
}
