import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { OPERATOR, V2, freePort, waitFor } from './app';

export { freePort };

export const ROOT = path.resolve(__dirname, '../..');

/** Fault tests run the real entry point (dist/main.js), as an operator would. */
export function buildDist(): void {
  execFileSync(process.execPath, [
    path.join(ROOT, 'node_modules/typescript/bin/tsc'),
    '-p',
    path.join(ROOT, 'tsconfig.build.json'),
  ]);
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
