/**
 * What became of the accepted items: the dataset's counts (contract §3). Accepted is not
 * searchable, so every summary reads them once; `--wait` reads them until nothing is pending.
 */
import { ContentClient, sleep, type DatasetCounts, type RetryPolicy } from './client';
import type { ImportOptions } from './importer';

type Target = Pick<ImportOptions, 'baseUrl' | 'org' | 'dataset' | 'token' | 'fetch' | 'retry'>;

/** A summary must not hang on a server that went away after the import: a few quick tries. */
const SNAPSHOT_RETRY: RetryPolicy = {
  attempts: 3,
  baseMs: 500,
  maxMs: 2000,
  maxRetryAfterMs: 5000,
};

function client(o: Target, retry: RetryPolicy | undefined, timeoutMs?: number): ContentClient {
  return new ContentClient({
    baseUrl: o.baseUrl,
    org: o.org,
    dataset: o.dataset,
    token: o.token,
    ...(retry ? { retry } : {}),
    ...(timeoutMs ? { timeoutMs } : {}),
    ...(o.fetch ? { fetch: o.fetch } : {}),
  });
}

/** The counts now, for the summary of a run without `--wait`. */
export function processingSnapshot(o: Target, signal: AbortSignal): Promise<DatasetCounts> {
  return client(o, o.retry ?? SNAPSHOT_RETRY, 10_000).counts(signal);
}

/** Polls the dataset's counts until nothing is pending (`--wait`). */
export async function waitForProcessing(
  o: Target,
  signal: AbortSignal,
  onTick: (c: DatasetCounts) => void,
  intervalMs = 2000,
): Promise<DatasetCounts> {
  const reader = client(o, o.retry);
  for (;;) {
    const c = await reader.counts(signal);
    onTick(c);
    if (c.pending === 0) return c;
    await sleep(intervalMs, signal);
  }
}
