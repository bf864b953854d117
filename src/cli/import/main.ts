/**
 * `npm run import -- --org ORG --dataset DS FILE`: bulk import of a JSON Lines or CSV
 * catalogue (see USAGE in args.ts and README "Bulk import").
 */
import fs from 'node:fs';
import { parseCli, USAGE, UsageError } from './args';
import { runImport } from './importer';
import { processingSnapshot, waitForProcessing } from './processing';
import { createProgress, formatSummary } from './progress';

export interface MainIo {
  env: Record<string, string | undefined>;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Interrupts the import (SIGINT/SIGTERM in the real command). */
  signal?: AbortSignal;
  fetch?: typeof fetch;
  /** Forces the progress style (tests); default: a bar when stderr is a terminal. */
  tty?: boolean;
  progressIntervalMs?: number;
}

export const EXIT = { ok: 0, fatal: 1, rejected: 2, interrupted: 130 } as const;

export async function main(argv: string[], io: MainIo): Promise<number> {
  let opts;
  try {
    const parsed = parseCli(argv, io.env);
    if (parsed === 'help') {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    opts = parsed;
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr.write(`${e.message}\n\n${USAGE}`);
    return EXIT.fatal;
  }
  if (!fs.existsSync(opts.file)) {
    io.stderr.write(`${opts.file}: no such file\n`);
    return EXIT.fatal;
  }
  const progress = createProgress(io.stderr, {
    quiet: opts.quiet,
    ...(io.tty !== undefined ? { tty: io.tty } : {}),
    ...(io.progressIntervalMs !== undefined ? { intervalMs: io.progressIntervalMs } : {}),
  });
  let result;
  try {
    result = await runImport({
      file: opts.file,
      format: opts.format,
      org: opts.org,
      dataset: opts.dataset,
      baseUrl: opts.baseUrl,
      token: opts.token,
      types: opts.types,
      statePath: opts.statePath,
      rejectedPath: opts.rejectedPath,
      restart: opts.restart,
      concurrency: opts.concurrency,
      limits: { maxBytes: opts.batchBytes, maxItems: opts.batchItems },
      progress,
      ...(io.signal ? { signal: io.signal } : {}),
      ...(io.fetch ? { fetch: io.fetch } : {}),
    });
  } catch (e) {
    progress.stop();
    io.stderr.write(`import: ${(e as Error).message}\n`);
    return EXIT.fatal;
  }
  let processing;
  let processingUnknown;
  if (result.complete) {
    const target = { ...opts, ...(io.fetch ? { fetch: io.fetch } : {}) };
    const signal = io.signal ?? new AbortController().signal;
    try {
      processing = opts.wait
        ? await waitForProcessing(target, signal, (c) => {
            if (!opts.quiet)
              io.stderr.write(
                `waiting: ${c.processed} processed, ${c.errors} errors, ${c.pending} pending of ${c.items}\n`,
              );
          })
        : await processingSnapshot(target, signal);
    } catch (e) {
      const why = (e as Error).message;
      // Waiting was asked for, so not knowing is a failure; a snapshot is only information.
      if (io.signal?.aborted) processingUnknown = 'interrupted';
      else if (opts.wait) result.fatal = `waiting for processing: ${why}`;
      else processingUnknown = why;
    }
  }
  io.stdout.write(
    formatSummary({
      file: opts.file,
      org: opts.org,
      dataset: opts.dataset,
      accepted: result.accepted,
      rejected: result.rejected,
      elapsedMs: result.elapsedMs,
      totalAccepted: result.state.accepted,
      totalRejected: result.state.rejected,
      ...(result.resumedFromLine !== undefined ? { resumedFromLine: result.resumedFromLine } : {}),
      complete: result.complete,
      firstRejections: result.firstRejections,
      rejectedFile: opts.rejectedPath,
      ...(result.fatal !== undefined ? { fatal: result.fatal } : {}),
      ...(processing ? { processing } : {}),
      ...(processingUnknown ? { processingUnknown } : {}),
    }),
  );
  if (result.fatal !== undefined) return EXIT.fatal;
  if (result.interrupted) return EXIT.interrupted;
  return result.state.rejected > 0 ? EXIT.rejected : EXIT.ok;
}

if (require.main === module) {
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    // The first signal stops cleanly (the state is always consistent); a second one exits now.
    if (++signals > 1) process.exit(EXIT.interrupted);
    process.stderr.write(`\nimport: ${sig}, stopping (the state file keeps what was done)\n`);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  main(process.argv.slice(2), {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    signal: controller.signal,
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`import: ${(e as Error).stack ?? String(e)}\n`);
      process.exitCode = EXIT.fatal;
    },
  );
}
