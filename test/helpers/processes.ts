import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { OPERATOR, V2, freePort, waitFor } from './app';

export { freePort };

export const ROOT = path.resolve(__dirname, '../..');

/** Blocks this worker for `ms` (the build lock is waited for synchronously, like the build). */
const pause = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

/** A hash of everything the build reads, so that a dist/ built from the same sources is reused. */
function sourcesHash(): string {
  const h = crypto.createHash('sha1');
  const add = (file: string) => h.update(path.relative(ROOT, file)).update(fs.readFileSync(file));
  const walk = (dir: string): void => {
    for (const e of fs
      .readdirSync(dir, { withFileTypes: true })
      .sort((a, b) => (a.name < b.name ? -1 : 1)))
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else add(path.join(dir, e.name));
  };
  walk(path.join(ROOT, 'src'));
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'])
    add(path.join(ROOT, f));
  return h.digest('hex');
}

/**
 * Fault tests run the real entry point (dist/main.js), as an operator would. Built at most once
 * per Jest run: suites running side by side must not rewrite dist/ while another's server loads
 * it. A dist/ this helper built from the same sources (and not rebuilt since, by its main.js) is
 * used as it is, so that the second Jest run of `npm test` does not build it again.
 */
export function buildDist(): void {
  // the Jest process: a worker's parent, or this process when the run is in band
  const run = process.send ? process.ppid : process.pid;
  const marker = path.join(ROOT, 'dist', `.built-for-run-${run}`);
  const built = path.join(ROOT, 'dist', '.built-from');
  const main = path.join(ROOT, 'dist', 'main.js');
  const lock = path.join(ROOT, 'dist.build-lock');
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (fs.existsSync(marker)) return;
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      // a lock left by a run that was killed mid-build is taken over
      const age =
        Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 120_000) fs.rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline)
        throw new Error('timed out waiting for another suite to build dist/');
      pause(100);
    }
  }
  try {
    if (fs.existsSync(marker)) return;
    const sources = sourcesHash();
    const stamp = () => `${sources} ${fs.statSync(main, { throwIfNoEntry: false })?.mtimeMs}`;
    const had = fs.existsSync(built) ? fs.readFileSync(built, 'utf8') : '';
    if (had !== stamp()) {
      execFileSync(process.execPath, [
        path.join(ROOT, 'node_modules/typescript/bin/tsc'),
        '-p',
        path.join(ROOT, 'tsconfig.build.json'),
      ]);
      fs.writeFileSync(built, stamp());
    }
    fs.writeFileSync(marker, '');
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/** Starts dist/main.js; its log goes to `<dataDir>/<name>.log` for diagnosing a failed run. */
export function spawnService(
  dataDir: string,
  name: string,
  env: Record<string, string>,
): ChildProcess {
  const log = fs.openSync(path.join(dataDir, `${name}.log`), 'a');
  return spawn(process.execPath, [path.join(ROOT, 'dist/main.js')], {
    env: {
      PATH: process.env.PATH,
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      OPERATOR_TOKEN: OPERATOR,
      IMAGE_FETCH_ALLOW_PRIVATE: 'true',
      RETRY_BASE_MS: '200',
      EMBEDDER: 'descriptor',
      // as test/helpers/app.ts: the duplicate pass only where a test is about it
      DUPLICATE_REPORT: 'off',
      // several processes share this host: each worker's health listener takes a free port
      PORT: '0',
      LOG_LEVEL: process.env.TEST_SERVER_LOG_LEVEL ?? 'warn',
      ...env,
    },
    stdio: ['ignore', log, log],
  });
}

/** Sends a signal and resolves with the exit code. */
export function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill(signal);
  return exited;
}

export interface HttpClient {
  base: string;
  call(
    method: string,
    p: string,
    token: string,
    body?: unknown,
    opts?: { timeoutMs?: number },
  ): Promise<{ status: number; headers: Headers; body: any }>;
  /** Waits for /healthz; on timeout the error carries `explain()` (e.g. the process's log). */
  up(timeoutMs?: number, explain?: () => string): Promise<void>;
}

export function httpClient(port: number): HttpClient {
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    async call(method, p, token, body, opts = {}) {
      const r = await fetch(base + p, {
        method,
        headers: {
          accept: V2,
          authorization: `token ${token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
        ...(opts.timeoutMs ? { signal: AbortSignal.timeout(opts.timeoutMs) } : {}),
      });
      const text = await r.text();
      let parsed: any = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON: kept as text */
      }
      return { status: r.status, headers: r.headers, body: parsed };
    },
    async up(timeoutMs = 30_000, explain) {
      try {
        await waitFor(
          'server up',
          () =>
            fetch(`${base}/healthz`).then(
              (r) => r.ok,
              () => false,
            ),
          timeoutMs,
        );
      } catch (e) {
        if (!explain) throw e;
        throw new Error(`${(e as Error).message} on ${base} within ${timeoutMs} ms\n${explain()}`, {
          cause: e,
        });
      }
    },
  };
}
