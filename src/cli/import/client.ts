/**
 * The HTTP side: POST content with retries (429, 5xx and network errors, exponential backoff
 * with jitter, `Retry-After` honoured), and a plain answer for everything else: accepted, the
 * server's per-item refusals (400 with contract §2 `details`), too large (413), or fatal.
 */

export interface ErrorDetail {
  index?: number;
  id?: string;
  field?: string;
  message?: string;
}

export type PostOutcome =
  | { kind: 'accepted' }
  | { kind: 'invalid'; message: string; details: ErrorDetail[] }
  | { kind: 'too_large'; message: string };

/** Stops the import: nothing sent later could succeed (bad token, unknown dataset, …). */
export class FatalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FatalError';
  }
}

export interface RetryPolicy {
  /** Tries of one request before giving up (the state file keeps what was done). */
  attempts: number;
  baseMs: number;
  maxMs: number;
  /** Longest `Retry-After` obeyed as given; longer ones are capped to this. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 10,
  baseMs: 500,
  maxMs: 30_000,
  maxRetryAfterMs: 5 * 60_000,
};

const RETRYABLE = new Set([429, 500, 502, 503, 504]);

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; undefined when absent or bad. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

/**
 * Wait before try `attempt + 1` (attempt counts from 0): exponential backoff with "equal
 * jitter" (half fixed, half random, so concurrent clients spread out), never shorter than the
 * server's `Retry-After` (plus a little jitter so retries do not arrive together).
 */
export function backoffDelay(
  attempt: number,
  retryAfterMs: number | undefined,
  p: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exp = Math.min(p.maxMs, p.baseMs * 2 ** attempt);
  const backoff = exp / 2 + (random() * exp) / 2;
  if (retryAfterMs === undefined) return Math.round(backoff);
  const ra = Math.min(retryAfterMs, p.maxRetryAfterMs);
  return Math.round(Math.max(ra + random() * Math.min(p.baseMs, ra / 10 + 50), backoff / 2));
}

export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export interface ClientOptions {
  baseUrl: string;
  org: string;
  dataset: string;
  token: string;
  retry?: RetryPolicy;
  /** Deadline of one request. */
  timeoutMs?: number;
  /** Told before each wait, for the progress display. */
  onRetry?: (info: { attempt: number; waitMs: number; reason: string }) => void;
  fetch?: typeof fetch;
}

interface ErrorBody {
  error?: { code?: string; message?: string; details?: ErrorDetail[]; request_id?: string };
}

export interface DatasetCounts {
  items: number;
  processed: number;
  pending: number;
  errors: number;
}

export class ContentClient {
  private readonly retry: RetryPolicy;
  private readonly fetch: typeof fetch;
  readonly contentUrl: string;
  readonly datasetUrl: string;

  constructor(private readonly o: ClientOptions) {
    this.retry = o.retry ?? DEFAULT_RETRY;
    this.fetch = o.fetch ?? globalThis.fetch;
    const base = o.baseUrl.replace(/\/+$/, '');
    this.datasetUrl = `${base}/orgs/${encodeURIComponent(o.org)}/datasets/${encodeURIComponent(o.dataset)}`;
    this.contentUrl = `${this.datasetUrl}/content`;
  }

  /** POSTs one body; retries what may pass later; throws FatalError for what cannot. */
  async post(body: string, signal: AbortSignal): Promise<PostOutcome> {
    const r = await this.send('POST', this.contentUrl, body, signal);
    if (r.status === 202 || (r.status >= 200 && r.status < 300)) return { kind: 'accepted' };
    const err = r.body?.error;
    const message = err?.message ?? `HTTP ${r.status}`;
    if (r.status === 400) return { kind: 'invalid', message, details: err?.details ?? [] };
    if (r.status === 413) return { kind: 'too_large', message };
    throw new FatalError(this.explain('POST', this.contentUrl, r.status, err));
  }

  /** The dataset's ingestion counts (contract §3), for `--wait`. */
  async counts(signal: AbortSignal): Promise<DatasetCounts> {
    const r = await this.send('GET', this.datasetUrl, undefined, signal);
    const counts = (r.body as { dataset?: { counts?: DatasetCounts } } | undefined)?.dataset
      ?.counts;
    if (r.status !== 200 || !counts)
      throw new FatalError(this.explain('GET', this.datasetUrl, r.status, r.body?.error));
    return counts;
  }

  private explain(method: string, url: string, status: number, err: ErrorBody['error']): string {
    const server = err?.message
      ? ` — server: ${err.code ? `${err.code}: ` : ''}${err.message}${err.request_id ? ` (request ${err.request_id})` : ''}`
      : '';
    const hint: Record<number, string> = {
      401: 'the token was refused: pass an organisation API token with --token or IMPORT_TOKEN',
      402: 'the organisation has no credits left',
      403: 'this token may not write content: use an organisation API token (org_…), not a dataset token',
      404: `organisation '${this.o.org}' or dataset '${this.o.dataset}' not found for this token (create the dataset first)`,
      406: 'the server does not speak version 2 of the API',
      415: 'the server refused the request body as not JSON',
    };
    return `${method} ${url} answered ${status}: ${hint[status] ?? 'unexpected answer'}${server}`;
  }

  private async send(
    method: string,
    url: string,
    body: string | undefined,
    signal: AbortSignal,
  ): Promise<{ status: number; body: ErrorBody | undefined }> {
    for (let attempt = 0; ; attempt++) {
      let reason: string;
      let retryAfter: number | undefined;
      try {
        const res = await this.fetch(url, {
          method,
          headers: {
            authorization: `token ${this.o.token}`,
            accept: 'application/vnd.service.v2+json',
            'user-agent': 'vss-import/1',
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          body,
          signal: AbortSignal.any([signal, AbortSignal.timeout(this.o.timeoutMs ?? 120_000)]),
        });
        const text = await res.text();
        let parsed: ErrorBody | undefined;
        try {
          parsed = JSON.parse(text) as ErrorBody;
        } catch {
          parsed = undefined;
        }
        if (!RETRYABLE.has(res.status)) return { status: res.status, body: parsed };
        reason = `HTTP ${res.status}${parsed?.error?.message ? ` (${parsed.error.message})` : ''}`;
        retryAfter = parseRetryAfter(res.headers.get('retry-after'));
      } catch (e) {
        if (signal.aborted) throw signal.reason;
        reason = describeNetworkError(e);
        if (hopeless(e)) throw new FatalError(`${method} ${url}: ${reason}; check --url`);
      }
      if (attempt + 1 >= this.retry.attempts)
        throw new FatalError(
          `${method} ${url} failed ${this.retry.attempts} times in a row, last: ${reason}; re-run the same command to resume`,
        );
      const waitMs = backoffDelay(attempt, retryAfter, this.retry);
      this.o.onRetry?.({ attempt: attempt + 1, waitMs, reason });
      await sleep(waitMs, signal);
    }
  }
}

/** Network errors that no retry can cure: a port fetch refuses, a host name DNS says is unknown. */
function hopeless(e: unknown): boolean {
  const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.message === 'bad port' || cause?.code === 'ENOTFOUND';
}

function describeNetworkError(e: unknown): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError') return 'request timed out';
  const cause = err?.cause?.code ?? err?.cause?.message;
  return `network error: ${err?.message ?? String(e)}${cause ? ` (${cause})` : ''}`;
}
