import crypto from 'node:crypto';
import type { RateAdmission, RateCounter } from '../../ports/rate-counter';
import { KeyedGroupCommit } from '../group-commit';
import { admitted, RATE_WINDOW_MS, refused, windowOf } from '../rate-window';
import { casUpdate, type Versioned } from './cas';
import type { EsIndices } from './indices';

/**
 * Versioned-write rounds before a 503. Every host with requests of one key writes its document
 * once per batch, so a hot key spread over many hosts meets more conflicts than a credit counter.
 */
const RATE_ATTEMPTS = 24;

/**
 * Windows kept before the sweep deletes them: a few minutes, so a host whose clock lags another's
 * by less than that still finds its window's count instead of starting it again from zero.
 */
const KEEP_MS = 10 * RATE_WINDOW_MS;

/** Documents one sweep deletes per round, and its rounds at most (the rest wait a minute). */
const SWEEP_PAGE = 5_000;
const SWEEP_PAGES = 10;

/** One key's requests admitted in one window; _id = key + NUL + window. */
interface RateDoc {
  key: string;
  window: number;
  n: number;
}

/**
 * The document of `key`'s window. Elasticsearch refuses an _id over 512 bytes, so a long key
 * is named by its hash (the document still carries the key itself).
 */
function docId(key: string, window: number): string {
  const name =
    Buffer.byteLength(key) > 256 ? crypto.createHash('sha256').update(key).digest('hex') : key;
  return `${name}\u0000${window}`;
}

interface Take {
  key: string;
  window: number;
  limit: number;
  now: number;
}

/**
 * Per-key rate windows in Elasticsearch, exact across any number of processes (contract §12,
 * §16 `rate`): each take is a versioned read-modify-write of the window's document (create-only
 * when absent), so every admission is counted once and hosts together admit at most `limit`.
 *
 * A process has at most one write in flight per document: takes that arrive meanwhile go
 * together in the next one (group commit), so a hot key costs one write per batch and contends
 * with other hosts only, not with itself. A batch of k admits min(k, limit − n).
 */
export class EsRateCounter implements RateCounter {
  private readonly docs = new KeyedGroupCommit(
    (id: string, takes: Take[]) => this.apply(id, takes),
    Infinity,
  );
  /** Each document as this process last wrote it (the next write needs no read), by window. */
  private readonly lastWritten = new Map<number, Map<string, Versioned<RateDoc>>>();
  /**
   * The count each document was last seen at, by window. A window's count only grows, so a key
   * seen at its limit is refused here without a round trip until the window ends.
   */
  private readonly reached = new Map<number, Map<string, number>>();
  /** The latest window a take was made in; older ones are forgotten here when it moves on. */
  private latest = -Infinity;
  private lastSweep = -Infinity;

  constructor(private readonly indices: EsIndices) {}

  async take(key: string, limit: number, now: number): Promise<RateAdmission> {
    const { start } = windowOf(now);
    this.advance(start, now);
    const id = docId(key, start);
    if ((this.reached.get(start)?.get(id) ?? 0) >= limit) return refused(now);
    return this.docs.submit(id, { key, window: start, limit, now });
  }

  private async apply(id: string, takes: Take[]): Promise<RateAdmission[]> {
    const { key, window } = takes[0]!;
    const known = this.lastWritten.get(window)?.get(id);
    let answers: RateAdmission[] = [];
    let count = 0;
    const { version } = await casUpdate<RateDoc>(
      this.client,
      this.indices.shared('rates'),
      id,
      (cur) => {
        let n = cur?.n ?? 0;
        answers = takes.map((t) => {
          if (n >= t.limit) return refused(t.now);
          n++;
          return admitted();
        });
        count = n;
        return n > (cur?.n ?? 0) ? { key, window, n } : undefined;
      },
      { what: 'the rate counter', attempts: RATE_ATTEMPTS, ...(known ? { known } : {}) },
    );
    if (version) this.remember(this.lastWritten, window, id, version);
    this.remember(this.reached, window, id, count);
    return answers;
  }

  private get client() {
    return this.indices.client;
  }

  private remember<V>(by: Map<number, Map<string, V>>, window: number, id: string, v: V): void {
    // a take of a window already forgotten (its batch was in flight) need not be remembered
    if (window < this.latest) return;
    let m = by.get(window);
    if (!m) by.set(window, (m = new Map()));
    m.set(id, v);
  }

  /**
   * Forgets what this process remembers of past windows when a new one begins, and at most once
   * a minute starts a sweep of the documents of windows older than KEEP_MS.
   */
  private advance(start: number, now: number): void {
    if (start > this.latest) {
      this.latest = start;
      for (const w of this.lastWritten.keys()) if (w < start) this.lastWritten.delete(w);
      for (const w of this.reached.keys()) if (w < start) this.reached.delete(w);
    }
    if (now - this.lastSweep < RATE_WINDOW_MS) return;
    this.lastSweep = now;
    // Not awaited, and a failure is dropped: it only leaves the documents to the next sweep.
    this.sweep(start - KEEP_MS).catch(() => undefined);
  }

  /**
   * Deletes the documents of windows before `before`: a search for their ids, then one `_bulk`
   * of deletes. Elasticsearch's delete_by_query needs the reindex module, which a cluster of the
   * server and transport modules alone lacks; and an index per period would need indices made
   * and dropped outside the shared declarations. Every process may sweep: deleting a document
   * twice is harmless, and nothing takes from a window that old again.
   */
  private async sweep(before: number): Promise<void> {
    const index = this.indices.shared('rates');
    for (let page = 0; page < SWEEP_PAGES; page++) {
      const r = await this.client.search({
        index,
        size: SWEEP_PAGE,
        _source: false,
        query: { range: { window: { lt: before } } },
      });
      const ids = r.hits.hits.map((h) => h._id!);
      if (!ids.length) return;
      // refreshed, so the next page's search no longer finds these
      await this.client.bulk({
        operations: ids.map((id) => ({ delete: { _index: index, _id: id } })),
        refresh: true,
      });
      if (ids.length < SWEEP_PAGE) return;
    }
  }
}
