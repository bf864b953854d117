import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { deleteInstallation, tempDir } from './app';
import { freePort, httpClient, spawnService, stopProcess, type HttpClient } from './processes';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';

/**
 * An installation of its own on the local Elasticsearch and RabbitMQ, run as dist/main.js
 * processes on different ports as on different hosts (contract §12): its own prefixes, a
 * directory for the processes' logs, and a DATA_DIR that is a regular file, so that any
 * process reading or writing under it fails.
 */
export class ProcessInstallation {
  readonly tag: string;
  readonly dir: string;
  /** The DATA_DIR every process gets. */
  readonly unusable: string;
  readonly env: Record<string, string>;
  readonly children: ChildProcess[] = [];

  constructor(letter: string, extraEnv: Record<string, string> = {}) {
    this.tag = `${letter}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    this.dir = tempDir(`vss-${letter}-`);
    this.unusable = path.join(this.dir, 'data-dir-is-a-file');
    fs.writeFileSync(this.unusable, 'not a directory\n');
    this.env = {
      SEARCH_BACKEND: 'elasticsearch',
      ELASTICSEARCH_URL: ES_URL,
      ES_INDEX_PREFIX: `${this.tag}-`,
      ELASTICSEARCH_REPLICAS: '0',
      QUEUE: 'rabbitmq',
      AMQP_QUEUE_PREFIX: `test.${this.tag}.`,
      DATA_DIR: this.unusable,
      // no operator token given: the installation generates one, once
      OPERATOR_TOKEN: '',
      ...extraEnv,
    };
  }

  /** The process's log (its stdout and stderr). */
  logOf(name: string): string {
    const file = path.join(this.dir, `${name}.log`);
    return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  }

  spawn(name: string, extra: Record<string, string>): ChildProcess {
    // spawnService writes the log to <dir>/<name>.log; DATA_DIR itself is the env's
    const child = spawnService(this.dir, name, { ...this.env, ...extra });
    this.children.push(child);
    return child;
  }

  /**
   * API hosts `api-a` and `api-b`, started at once, so that exactly one generates the operator
   * token: their clients once both answer, and the tokens their logs printed.
   */
  async twoApis(): Promise<{ a: HttpClient; b: HttpClient; printed: string[] }> {
    const [pa, pb] = [await freePort(), await freePort()];
    this.spawn('api-a', { APP_ROLES: 'api', PORT: String(pa) });
    this.spawn('api-b', { APP_ROLES: 'api', PORT: String(pb) });
    const [a, b] = [httpClient(pa), httpClient(pb)];
    // generous: in CI this shares two cores with the three-node cluster's restart test
    const tail = (n: string) => () => `--- ${n}.log (tail) ---\n${this.logOf(n).slice(-4000)}`;
    await Promise.all([a.up(90_000, tail('api-a')), b.up(90_000, tail('api-b'))]);
    const printed = ['api-a', 'api-b']
      .map((n) => /Operator token \(shown once[^:]*\): (op_\S+)/.exec(this.logOf(n))?.[1])
      .filter((t): t is string => t !== undefined);
    return { a, b, printed };
  }

  /** Whether DATA_DIR is still the file it was made as. */
  dataDirUntouched(): boolean {
    return fs.readFileSync(this.unusable, 'utf8') === 'not a directory\n';
  }

  /** Stops every process and deletes the installation's indices. */
  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => stopProcess(c, 'SIGTERM')));
    await deleteInstallation(ES_URL, `${this.tag}-`);
  }
}
