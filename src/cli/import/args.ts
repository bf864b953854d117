/** Command-line arguments of `npm run import` (node:util parseArgs), checked in one place. */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LIMITS } from '../../domain/limits';
import { formatOf, type Format } from './source';
import { parseTypes, type FieldType } from './types';
import { defaultRejectedPath, defaultStatePath, type ImportOptions } from './importer';

export const USAGE = `Usage: npm run import -- --org ORG --dataset DS [options] FILE

Imports a catalogue into a dataset with POST content, in batches, resumably.
FILE is JSON Lines (.jsonl, .ndjson: one object per line with id, url and metadata, either
as a "metadata" object or as the other keys) or CSV (.csv: a header row with id, url and one
column per metadata field).

Options:
  --org ORG             organisation (required)
  --dataset DS          dataset (required; create it first)
  --url URL             service base URL (default: IMPORT_URL or http://localhost:4000)
  --token T             organisation API token (default: the IMPORT_TOKEN variable, which
                        keeps it out of the process list)
  --types F=T,...       metadata types: string, number, boolean, array (strings split on "|"),
                        number[]; undeclared CSV cells are inferred (numbers, true/false, text)
  --format jsonl|csv    when the file name does not tell
  --state FILE          resume state (default: FILE.import-state.json)
  --rejected FILE       rejected lines with reasons (default: FILE.rejected.jsonl)
  --restart             ignore the saved state and start from the first line
  --concurrency N       requests in flight (default 3, at most 16)
  --batch-items N       items per request (default 1000)
  --batch-bytes N       bytes per request body (default and maximum ${LIMITS.requestBodyBytes})
  --wait                after the import, wait until the dataset has processed every item
                        (without it, the summary shows how far processing has got)
  --quiet               no progress display
  -h, --help            this text

Exit status: 0 every line accepted, 2 some lines rejected, 1 error, 130 interrupted.
`;

/** The importer's own options as the command line gives them, and what only main() reads. */
export interface CliOptions extends Pick<
  ImportOptions,
  | 'file'
  | 'org'
  | 'dataset'
  | 'baseUrl'
  | 'token'
  | 'types'
  | 'statePath'
  | 'rejectedPath'
  | 'restart'
  | 'concurrency'
> {
  format: Format;
  batchItems: number;
  batchBytes: number;
  wait: boolean;
  quiet: boolean;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

function intOption(
  v: string | undefined,
  name: string,
  def: number,
  min: number,
  max: number,
  problems: string[],
): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    problems.push(`--${name}: expected an integer from ${min} to ${max}, got '${v}'`);
    return def;
  }
  return n;
}

/** Parses argv (without node and the script); `help` when -h/--help was given. */
export function parseCli(
  argv: string[],
  env: Record<string, string | undefined>,
): CliOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        org: { type: 'string' },
        dataset: { type: 'string' },
        url: { type: 'string' },
        token: { type: 'string' },
        types: { type: 'string' },
        format: { type: 'string' },
        state: { type: 'string' },
        rejected: { type: 'string' },
        restart: { type: 'boolean', default: false },
        concurrency: { type: 'string' },
        'batch-items': { type: 'string' },
        'batch-bytes': { type: 'string' },
        wait: { type: 'boolean', default: false },
        quiet: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { values: v, positionals } = parsed;
  if (v.help) return 'help';
  const problems: string[] = [];
  if (!v.org) problems.push('--org is required');
  if (!v.dataset) problems.push('--dataset is required');
  const token = v.token ?? env.IMPORT_TOKEN;
  if (!token) problems.push('a token is required: --token or the IMPORT_TOKEN variable');
  if (positionals.length !== 1)
    problems.push(
      positionals.length === 0
        ? 'FILE is required'
        : `one FILE expected, got ${positionals.length}`,
    );
  // `npm run import` runs in the package's folder; relative paths mean the caller's folder.
  const cwd = env.npm_lifecycle_event === 'import' && env.INIT_CWD ? env.INIT_CWD : process.cwd();
  const at = (p: string) => path.resolve(cwd, p);
  const file = positionals[0] ? at(positionals[0]) : '';
  let format: Format | undefined;
  if (v.format !== undefined) {
    if (v.format === 'jsonl' || v.format === 'ndjson') format = 'jsonl';
    else if (v.format === 'csv') format = 'csv';
    else problems.push(`--format: expected jsonl or csv, got '${v.format}'`);
  } else if (file) {
    format = formatOf(file);
    if (!format)
      problems.push(`${file}: cannot tell the format from the name; pass --format jsonl|csv`);
  }
  const baseUrl = v.url ?? env.IMPORT_URL ?? 'http://localhost:4000';
  try {
    const u = new URL(baseUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    problems.push(`--url: expected an http(s) URL, got '${baseUrl}'`);
  }
  let types = new Map<string, FieldType>();
  try {
    types = parseTypes(v.types);
  } catch (e) {
    problems.push((e as Error).message);
  }
  const concurrency = intOption(v.concurrency, 'concurrency', 3, 1, 16, problems);
  const batchItems = intOption(v['batch-items'], 'batch-items', 1000, 1, 1_000_000, problems);
  const batchBytes = intOption(
    v['batch-bytes'],
    'batch-bytes',
    LIMITS.requestBodyBytes,
    1024,
    LIMITS.requestBodyBytes,
    problems,
  );
  if (problems.length) throw new UsageError(problems.join('\n'));
  return {
    file,
    format: format!,
    org: v.org!,
    dataset: v.dataset!,
    baseUrl,
    token: token!,
    types,
    statePath: v.state ? at(v.state) : defaultStatePath(file),
    rejectedPath: v.rejected ? at(v.rejected) : defaultRejectedPath(file),
    restart: v.restart ?? false,
    concurrency,
    batchItems,
    batchBytes,
    wait: v.wait ?? false,
    quiet: v.quiet ?? false,
  };
}
