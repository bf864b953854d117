import type { Client } from '@elastic/elasticsearch';
import { KeyedGroupCommit } from '../group-commit';

/**
 * The least time between two refreshes this process asks of one index: writes arriving within
 * it share the next one, so a stream of single-item writes makes at most ten segments a second
 * per process, and none waits longer than this for its 202.
 */
const MIN_REFRESH_GAP_MS = 100;

/**
 * Makes client writes visible before they are answered (contract §4: an item is listed as soon
 * as its write returned 202), without a short refresh interval for the whole index.
 *
 * The index refreshes on its own only every second, so the workers' results, which nobody
 * waits for, go into few and larger segments: a shorter interval makes many small segments,
 * and merging their HNSW graphs costs Elasticsearch more CPU per image (docs/engines.md). A
 * client write instead asks for a
 * refresh of its index here, at once when none is running; writes arriving while one runs share
 * the next.
 */
export class Refresher {
  private readonly refreshes = new KeyedGroupCommit(
    (index: string, waiting: void[]) => this.refresh(index, waiting.length),
    Infinity,
  );
  private readonly lastStarted = new Map<string, number>();

  constructor(
    private readonly client: () => Client,
    private readonly minGapMs = MIN_REFRESH_GAP_MS,
  ) {}

  /** Resolves once everything written to `index` before the call is searchable. */
  visible(index: string): Promise<void> {
    return this.refreshes.submit(index, undefined);
  }

  private async refresh(index: string, waiting: number): Promise<void[]> {
    const wait = (this.lastStarted.get(index) ?? 0) + this.minGapMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (this.lastStarted.size >= 10_000) this.lastStarted.clear();
    this.lastStarted.set(index, Date.now());
    // A dataset deleted meanwhile has no index left to make anything visible in.
    // (a copy that did not refresh is a 503: WholeAnswerTransport, client.ts)
    await this.client().indices.refresh({ index, ignore_unavailable: true });
    return Array.from({ length: waiting }, () => undefined);
  }
}
