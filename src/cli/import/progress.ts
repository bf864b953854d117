/**
 * What the user sees: a progress bar with items/s on a terminal (cli-progress), a plain line
 * every few seconds otherwise (logs, CI), and the closing summary.
 */
import cliProgress from 'cli-progress';
import type { Rejection } from './batcher';

interface ProgressFigures {
  /** Bytes of the input acknowledged so far, and the input's size. */
  offset: number;
  size: number;
  /** Items accepted and lines rejected during this run. */
  accepted: number;
  rejected: number;
  elapsedMs: number;
}

export interface Progress {
  update(f: ProgressFigures): void;
  /** A transient problem worth showing (a retry). */
  note(message: string): void;
  stop(): void;
}

const rate = (items: number, ms: number): number => (ms > 0 ? Math.round((items * 1000) / ms) : 0);

const fmt = (n: number): string => n.toLocaleString('en-US');

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 1 : 0)} MiB`;
}

export function createProgress(
  stream: NodeJS.WriteStream | NodeJS.WritableStream,
  opts: { tty?: boolean; intervalMs?: number; quiet?: boolean } = {},
): Progress {
  if (opts.quiet) return { update: () => undefined, note: () => undefined, stop: () => undefined };
  const tty = opts.tty ?? !!(stream as NodeJS.WriteStream).isTTY;
  if (tty) {
    const bar = new cliProgress.SingleBar(
      {
        stream,
        format:
          '{bar} {percentage}% | {done} of {total_h} | {accepted} accepted, {rejected} rejected | {rate} items/s | ETA {eta_formatted}',
        hideCursor: true,
        etaBuffer: 50,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    const start = (f: ProgressFigures) => {
      bar.start(Math.max(f.size, 1), f.offset, payload(f));
      started = true;
    };
    const payload = (f: ProgressFigures) => ({
      done: mib(f.offset),
      total_h: mib(f.size),
      accepted: fmt(f.accepted),
      rejected: fmt(f.rejected),
      rate: fmt(rate(f.accepted, f.elapsedMs)),
    });
    return {
      update(f) {
        if (!started) start(f);
        else bar.update(f.offset, payload(f));
      },
      note(message) {
        if (started) bar.stop();
        stream.write(`${message}\n`);
        started = false;
      },
      stop() {
        if (started) bar.stop();
        started = false;
      },
    };
  }
  const interval = opts.intervalMs ?? 5000;
  let last = 0;
  let latest: ProgressFigures | undefined;
  const print = (f: ProgressFigures) => {
    const pct = f.size > 0 ? Math.floor((f.offset * 100) / f.size) : 100;
    stream.write(
      `import: ${pct}% (${mib(f.offset)} of ${mib(f.size)}), ${fmt(f.accepted)} accepted, ${fmt(f.rejected)} rejected, ${fmt(rate(f.accepted, f.elapsedMs))} items/s\n`,
    );
  };
  return {
    update(f) {
      latest = f;
      if (f.elapsedMs - last >= interval) {
        last = f.elapsedMs;
        print(f);
      }
    },
    note(message) {
      stream.write(`${message}\n`);
    },
    stop() {
      if (latest && latest.elapsedMs !== last) print(latest);
    },
  };
}

export interface Summary {
  file: string;
  org: string;
  dataset: string;
  /** This run. */
  accepted: number;
  rejected: number;
  elapsedMs: number;
  /** Across every run of this import (the state file's counts). */
  totalAccepted: number;
  totalRejected: number;
  resumedFromLine?: number;
  complete: boolean;
  firstRejections: Rejection[];
  rejectedFile: string;
  fatal?: string;
  /** The dataset's counts when the summary is written (after `--wait`: nothing pending). */
  processing?: { items: number; processed: number; errors: number; pending: number };
  /** Why the counts could not be read. */
  processingUnknown?: string;
}

export function formatSummary(s: Summary): string {
  const out: string[] = [];
  const secs = (s.elapsedMs / 1000).toFixed(1);
  const head = s.fatal ? 'stopped' : s.complete ? 'done' : 'interrupted';
  out.push(
    `Import of ${s.file} into ${s.org}/${s.dataset}: ${head} after ${secs} s (${fmt(rate(s.accepted, s.elapsedMs))} items/s)`,
  );
  if (s.resumedFromLine !== undefined && s.resumedFromLine > 1)
    out.push(`  resumed at line ${fmt(s.resumedFromLine)}; totals include the earlier runs`);
  out.push(
    `  accepted: ${fmt(s.totalAccepted)}${s.totalAccepted !== s.accepted ? ` (${fmt(s.accepted)} in this run)` : ''}`,
  );
  out.push(
    `  rejected: ${fmt(s.totalRejected)}${s.totalRejected !== s.rejected ? ` (${fmt(s.rejected)} in this run)` : ''}`,
  );
  if (s.firstRejections.length) {
    for (const r of s.firstRejections)
      out.push(
        `    line ${r.line}${r.id !== undefined ? ` (id ${JSON.stringify(r.id)})` : ''}: ${r.field ? `${r.field}: ` : ''}${r.reason}`,
      );
    if (s.rejected > s.firstRejections.length)
      out.push(`    … ${fmt(s.rejected - s.firstRejections.length)} more`);
  }
  if (s.totalRejected > 0) out.push(`  every rejected line, with its reason: ${s.rejectedFile}`);
  const p = s.processing;
  if (p) {
    out.push(
      `  processed: ${fmt(p.processed)} of ${fmt(p.items)} items in the dataset${p.pending ? ' so far' : ''}, ${fmt(p.errors)} with processing errors${p.pending ? `, ${fmt(p.pending)} pending` : ''}`,
    );
    if (p.pending)
      out.push('    (the service goes on processing them; --wait waits until none is pending)');
  }
  if (s.processingUnknown) out.push(`  processed: unknown (${s.processingUnknown})`);
  if (s.fatal) out.push(`  error: ${s.fatal}`);
  if (!s.complete) out.push('  re-run the same command to resume where it stopped');
  return `${out.join('\n')}\n`;
}
