/**
 * The import pipeline: read entries → batches → a few POSTs in flight → acknowledge batches in
 * input order → save the resume state. A batch the server refuses item by item (400 with
 * details) loses the named items, which are reported, and the rest is sent again; a batch the
 * server finds too large (413) is split. Re-sending an item is harmless (POST replaces), so a
 * resume may repeat the batches that were in flight when the previous run stopped.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  Batcher,
  requestBody,
  type Batch,
  type BatchItem,
  type BatchLimits,
  type Rejection,
} from './batcher';
import { ContentClient, FatalError, type ErrorDetail, type RetryPolicy } from './client';
import type { Progress } from './progress';
import { readEntries, formatOf, type Format } from './source';
import {
  fileHead,
  loadState,
  RejectedLog,
  resumeProblem,
  saveState,
  type ImportState,
} from './state';
import type { FieldType } from './types';

export interface ImportOptions {
  file: string;
  format?: Format;
  org: string;
  dataset: string;
  baseUrl: string;
  token: string;
  types: Map<string, FieldType>;
  statePath: string;
  rejectedPath: string;
  /** Ignore a saved state and import from the first line. */
  restart: boolean;
  /** Requests in flight at once. */
  concurrency: number;
  limits: BatchLimits;
  retry?: RetryPolicy;
  progress: Progress;
  /** Aborting it interrupts the import (as Ctrl-C does); the saved state stays valid. */
  signal?: AbortSignal;
  fetch?: typeof fetch;
  /** Rejections kept in memory for the summary. */
  keepRejections?: number;
}

export interface ImportResult {
  state: ImportState;
  /** This run's figures. */
  accepted: number;
  rejected: number;
  elapsedMs: number;
  firstRejections: Rejection[];
  resumedFromLine?: number;
  complete: boolean;
  interrupted: boolean;
  fatal?: string;
}

interface InFlight {
  batch: Batch;
  done: boolean;
  accepted: number;
  rejected: Rejection[];
}

export function defaultStatePath(file: string): string {
  return `${file}.import-state.json`;
}

export function defaultRejectedPath(file: string): string {
  return `${file}.rejected.jsonl`;
}

export async function runImport(o: ImportOptions): Promise<ImportResult> {
  const t0 = performance.now();
  const format = o.format ?? formatOf(o.file);
  if (!format) throw new FatalError(`${o.file}: unknown format (expected .jsonl, .ndjson or .csv)`);
  const size = fs.statSync(o.file).size;
  let state = o.restart ? undefined : loadState(o.statePath);
  if (state) {
    const problem = resumeProblem(state, { file: o.file, size, org: o.org, dataset: o.dataset });
    if (problem)
      throw new FatalError(
        `cannot resume from ${o.statePath}: ${problem}; pass --restart to import from the first line`,
      );
  }
  const resumed = !!state;
  state ??= {
    version: 1,
    input: { path: path.resolve(o.file), size, head: fileHead(o.file) },
    org: o.org,
    dataset: o.dataset,
    offset: 0,
    line: 1,
    accepted: 0,
    rejected: 0,
    rejectedBytes: 0,
    done: false,
    updatedAt: new Date().toISOString(),
  };
  const st: ImportState = state;
  st.input.size = size;
  st.done = false;
  const resumedFromLine = resumed ? st.line : undefined;
  const log = new RejectedLog(o.rejectedPath, resumed ? st.rejectedBytes : 0);
  st.rejectedBytes = log.bytes;
  saveState(o.statePath, st);

  const controller = new AbortController();
  let interrupted = false;
  const onAbort = () => {
    interrupted = true;
    controller.abort(new Error('interrupted'));
  };
  if (o.signal?.aborted) onAbort();
  o.signal?.addEventListener('abort', onAbort, { once: true });
  const signal = controller.signal;

  const client = new ContentClient({
    baseUrl: o.baseUrl,
    org: o.org,
    dataset: o.dataset,
    token: o.token,
    ...(o.retry ? { retry: o.retry } : {}),
    ...(o.fetch ? { fetch: o.fetch } : {}),
    onRetry: ({ attempt, waitMs, reason }) =>
      o.progress.note(`import: ${reason}; retry ${attempt} in ${(waitMs / 1000).toFixed(1)} s`),
  });

  const keep = o.keepRejections ?? 10;
  const run = { accepted: 0, rejected: 0, first: [] as Rejection[] };
  let fatal: string | undefined;
  const fail = (e: unknown) => {
    if (signal.aborted && !(e instanceof FatalError)) return; // an interruption, not a failure
    fatal ??= e instanceof Error ? e.message : String(e);
    controller.abort(new Error('stopped'));
  };
  const figures = () => ({
    offset: st.offset,
    size,
    accepted: run.accepted,
    rejected: run.rejected,
    elapsedMs: performance.now() - t0,
  });

  const window: InFlight[] = [];
  const inflight = new Set<Promise<void>>();

  /** Acknowledges the finished batches at the head of the window, in input order. */
  const acknowledge = () => {
    while (window.length > 0 && window[0].done) {
      const f = window.shift()!;
      const rejected = f.rejected.sort((a, b) => a.line - b.line);
      log.append(rejected.map(rejectionRecord));
      st.accepted += f.accepted;
      st.rejected += rejected.length;
      st.offset = f.batch.end;
      st.line = f.batch.nextLine;
      st.rejectedBytes = log.bytes;
      st.updatedAt = new Date().toISOString();
      saveState(o.statePath, st);
      run.accepted += f.accepted;
      run.rejected += rejected.length;
      for (const r of rejected) if (run.first.length < keep) run.first.push(r);
      o.progress.update(figures());
    }
  };

  const send = async (f: InFlight): Promise<void> => {
    const queue: BatchItem[][] = [f.batch.items];
    while (queue.length > 0) {
      const group = queue.shift()!;
      if (group.length === 0) continue;
      const out = await client.post(requestBody(group), signal);
      if (out.kind === 'accepted') {
        f.accepted += group.length;
      } else if (out.kind === 'too_large') {
        if (group.length === 1) {
          f.rejected.push({
            line: group[0].line,
            id: group[0].id,
            reason: `the server refused the item as too large: ${out.message}`,
            by: 'server',
          });
        } else {
          const half = Math.ceil(group.length / 2);
          queue.unshift(group.slice(0, half), group.slice(half));
        }
      } else {
        const bad = badItems(group, out.details);
        if (bad.size === 0)
          throw new FatalError(
            `the server refused the batch of lines ${group[0].line}–${group[group.length - 1].line} without naming an item: ${out.message}`,
          );
        for (const [i, details] of bad) {
          f.rejected.push({
            line: group[i].line,
            id: group[i].id,
            ...(details[0].field ? { field: details[0].field } : {}),
            reason: details
              .map((d, k) => `${k > 0 && d.field ? `${d.field}: ` : ''}${d.message ?? 'refused'}`)
              .join('; '),
            by: 'server',
          });
        }
        queue.unshift(group.filter((_, i) => !bad.has(i)));
      }
    }
  };

  const maxWindow = o.concurrency * 4;
  const dispatch = async (batch: Batch): Promise<void> => {
    const f: InFlight = { batch, done: false, accepted: 0, rejected: [...batch.rejected] };
    batch.rejected = [];
    window.push(f);
    const p: Promise<void> = send(f)
      .then(() => {
        f.done = true;
        batch.items = []; // the bodies are no longer needed
        acknowledge();
      }, fail)
      .catch(fail)
      .finally(() => inflight.delete(p));
    inflight.add(p);
    while (!signal.aborted && (inflight.size >= o.concurrency || window.length >= maxWindow))
      await Promise.race(inflight);
  };

  let reachedEnd = false;
  const batcher = new Batcher(o.limits, st.offset, st.line);
  try {
    for await (const e of readEntries({
      file: o.file,
      format,
      start: st.offset,
      line: st.line,
      types: o.types,
      maxRecordBytes: o.limits.maxBytes,
    })) {
      if (signal.aborted) break;
      const closed = batcher.add(e);
      if (closed) await dispatch(closed);
      if (signal.aborted) break;
    }
    if (!signal.aborted) {
      reachedEnd = true;
      const last = batcher.flush();
      if (last) await dispatch(last);
    }
  } catch (e) {
    fail(e instanceof FatalError ? e : new FatalError((e as Error).message));
  }
  await Promise.all(inflight);
  o.signal?.removeEventListener('abort', onAbort);
  const complete = reachedEnd && !fatal && !interrupted && window.length === 0;
  if (complete) {
    st.done = true;
    saveState(o.statePath, st);
  }
  log.close();
  o.progress.update(figures());
  o.progress.stop();
  return {
    state: st,
    accepted: run.accepted,
    rejected: run.rejected,
    elapsedMs: performance.now() - t0,
    firstRejections: run.first,
    ...(resumedFromLine !== undefined ? { resumedFromLine } : {}),
    complete,
    interrupted: interrupted && !fatal,
    ...(fatal !== undefined ? { fatal } : {}),
  };
}

/** The items a 400 names (by index, else by id), each with its details. */
export function badItems(group: BatchItem[], details: ErrorDetail[]): Map<number, ErrorDetail[]> {
  const bad = new Map<number, ErrorDetail[]>();
  const add = (i: number, d: ErrorDetail) => bad.set(i, [...(bad.get(i) ?? []), d]);
  for (const d of details) {
    if (
      typeof d.index === 'number' &&
      Number.isInteger(d.index) &&
      d.index >= 0 &&
      d.index < group.length
    )
      add(d.index, d);
    else if (typeof d.id === 'string')
      group.forEach((item, i) => {
        if (item.id === d.id) add(i, d);
      });
  }
  return bad;
}

const rejectionRecord = (r: Rejection) => ({
  line: r.line,
  ...(r.id !== undefined ? { id: r.id } : {}),
  ...(r.field !== undefined ? { field: r.field } : {}),
  reason: r.reason,
  by: r.by,
});
