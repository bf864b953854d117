/**
 * Resume state: how far the import has been acknowledged (byte offset and line number of the
 * first line not yet done), the running counts, and how long the rejected-lines file was at
 * that point. Written atomically (temp file, fsync, rename) after every acknowledged batch.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface ImportState {
  version: 1;
  /** What was being imported, to refuse resuming a different file or destination. */
  input: { path: string; size: number; head: FileHead };
  org: string;
  dataset: string;
  /** First byte and line not yet acknowledged. */
  offset: number;
  line: number;
  accepted: number;
  rejected: number;
  /** Size of the rejected-lines file when this state was written. */
  rejectedBytes: number;
  /** The whole input has been acknowledged. */
  done: boolean;
  updatedAt: string;
}

/** sha256 of the file's first bytes: tells a different file from the same one grown. */
export interface FileHead {
  bytes: number;
  sha256: string;
}

const HEAD_BYTES = 64 * 1024;

export function fileHead(file: string, bytes = HEAD_BYTES): FileHead {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    let n = 0;
    for (let r = 1; n < bytes && r > 0; n += r) r = fs.readSync(fd, buf, n, bytes - n, n);
    return { bytes: n, sha256: createHash('sha256').update(buf.subarray(0, n)).digest('hex') };
  } finally {
    fs.closeSync(fd);
  }
}

export function loadState(file: string): ImportState | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let s: ImportState;
  try {
    s = JSON.parse(text) as ImportState;
  } catch {
    throw new Error(`state file ${file} is not valid JSON; remove it or pass --restart`);
  }
  if (s.version !== 1 || typeof s.offset !== 'number' || typeof s.line !== 'number')
    throw new Error(`state file ${file} is not an import state; remove it or pass --restart`);
  return s;
}

/** Why this state cannot be resumed for this run, or undefined when it can. */
export function resumeProblem(
  s: ImportState,
  run: { file: string; size: number; org: string; dataset: string },
): string | undefined {
  if (s.org !== run.org || s.dataset !== run.dataset)
    return `it belongs to an import into ${s.org}/${s.dataset}`;
  if (fileHead(run.file, s.input.head.bytes).sha256 !== s.input.head.sha256)
    return 'the input file has changed since';
  if (run.size < s.offset) return `the input file is shorter than the ${s.offset} bytes done`;
  return undefined;
}

/** Writes the state so that a crash at any moment leaves either the old or the new one. */
export function saveState(file: string, s: ImportState): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writeSync(fd, `${JSON.stringify(s, null, 2)}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/**
 * The rejected-lines file (one JSON object per line: line, id, field, reason, by). On resume it
 * is cut back to its size at the last saved state, so lines read again are not listed twice.
 */
export class RejectedLog {
  private fd: number;
  bytes: number;

  constructor(
    readonly file: string,
    keepBytes: number,
  ) {
    this.fd = fs.openSync(file, fs.existsSync(file) ? 'r+' : 'w+');
    fs.ftruncateSync(this.fd, Math.min(keepBytes, fs.fstatSync(this.fd).size));
    this.bytes = fs.fstatSync(this.fd).size;
  }

  append(records: object[]): void {
    if (records.length === 0) return;
    const buf = Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    let done = 0;
    while (done < buf.length)
      done += fs.writeSync(this.fd, buf, done, buf.length - done, this.bytes + done);
    this.bytes += buf.length;
    fs.fsyncSync(this.fd);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
