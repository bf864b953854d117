import type { Logger } from 'pino';
import { startBackgroundPass } from './background-pass';
import type { Dataset, DatasetCounts } from '../domain/dataset';
import { CopyMatcher } from '../domain/copy-signature';
import { MAX_DISTANCE, NEIGHBOURS_KEPT, nearCopy, samePixels } from '../domain/duplicates';
import type { DuplicateStore, NeighbourEntry, PassState } from '../ports/duplicate-store';
import type { ItemReader } from '../ports/item-reader';
import type { FoundNeighbours, SearchEngine } from '../ports/search-engine';

/** How long the installation-wide pass lease lasts without renewal. */
const LEASE_MS = 60_000;
/** Items listed per read; the pass records its progress after each page. */
const LIST_PAGE = 500;
/**
 * Longest stretch one dataset's pass runs before the next dataset's turn: a first pass over a
 * large dataset takes minutes, and the others' reports are due within 60 s (contract §18).
 */
const SLICE_MS = 20_000;
/** Small: the embedded engine's search of a batch holds its process's event loop. */
const SEARCH_BATCH = 20;
/** Pairs scored between two yields to the event loop (about 0.2 ms each). */
const SCORED_PER_YIELD = 32;
/**
 * Items processed this long before a pass started are searchable by then on either engine
 * (Elasticsearch shows writes after its 1 s refresh; a worker's write lands after its
 * processedAt): the next pass starts from there, so nothing falls between two passes.
 */
const SETTLE_MS = 5_000;
/**
 * A dataset still processing waits for its pass (the report runs after processing, contract
 * §18), except that a long ingestion still gets one this often.
 */
const BUSY_PASS_EVERY_MS = 5 * 60_000;

export interface DuplicatePassDeps {
  store: DuplicateStore;
  reader: Pick<ItemReader, 'processedSince' | 'getItems'>;
  engine: Pick<SearchEngine, 'neighbours' | 'compact'>;
  datasets: () => Promise<Dataset[]>;
  counts: (datasetId: string) => Promise<DatasetCounts>;
  /** Processed items of the dataset still waiting for a vector by `embedder` (re-embedding). */
  waitingForEmbedder: (datasetId: string, embedder: string) => Promise<number>;
  now: () => number;
  log: Logger;
  /** This process, as the lease names it. */
  owner: string;
  /** Items per page and the slice length (LIST_PAGE, SLICE_MS), smaller in tests. */
  pageSize?: number;
  sliceMs?: number;
}

/**
 * Keeps the near-duplicate report current (contract §18): one process of the installation
 * holds the lease and, per dataset, searches the neighbours of every item processed since its
 * last pass (all of them at first, or after an embedder change) and stores them. The report
 * then reads stored neighbours only; an entry whose item or neighbour was processed again since
 * is ignored there until the next pass searches that item again. A dataset's pass runs in
 * slices, datasets taking turns, and records after every page how far it got: a long first
 * pass neither holds up the other datasets' reports nor starts over when its process stops.
 */
export class DuplicatePass {
  /** Compares the pictures of neighbour pairs, keeping each one's views a while. */
  private readonly matcher = new CopyMatcher();
  /** Per dataset, since when this process has seen it still processing. */
  private readonly busySince = new Map<string, number>();

  constructor(private readonly deps: DuplicatePassDeps) {}

  /** Set by halt(): a pass records its progress and stops after the current page. */
  private halting = false;

  /**
   * A pass over every dataset, in turns of one slice each until none has more to search;
   * false when another process holds the lease.
   */
  async pass(): Promise<boolean> {
    if (!(await this.renew())) return false;
    let more = true;
    while (more && !this.halting) {
      more = false;
      for (const ds of await this.deps.datasets()) {
        if (!ds.embedder || this.halting) continue;
        const done = await this.dataset(ds.id, ds.embedder.id);
        if (done === 'lost') return true;
        if (done === 'paused') more = true;
      }
    }
    return true;
  }

  /** Stops a running pass at its next page, its progress recorded (a process shutting down). */
  halt(): void {
    this.halting = true;
  }

  private renew(): Promise<boolean> {
    const t = this.deps.now();
    return this.deps.store.claim(this.deps.owner, t, t + LEASE_MS);
  }

  /**
   * Searches what changed in one dataset since its last pass, or goes on with a pass cut short:
   * true when it finished one, false when there was nothing (yet) to do, 'paused' when its
   * slice ended with more to search, 'lost' when the lease went to another process meanwhile.
   */
  async dataset(datasetId: string, embedder: string): Promise<boolean | 'paused' | 'lost'> {
    const { store, reader, now } = this.deps;
    const pageSize = this.deps.pageSize ?? LIST_PAGE;
    const state = await store.state(datasetId);
    const t = now();
    const sameEmbedder = state.progress?.embedder === embedder;
    // entries of another embedder, from a finished pass or one cut short
    const other =
      (state.embedder !== undefined && state.embedder !== embedder) ||
      (state.progress !== undefined && !sameEmbedder);
    const resumed = !other && sameEmbedder ? state.progress : undefined;
    // a re-embedding does not change processedAt: the pass starts over (or goes on) once every
    // item has its new vector, and until then the report shows what it has; an item searched
    // before its new vector would be left out for good
    if ((other || resumed) && (await this.deps.waitingForEmbedder(datasetId, embedder)) > 0)
      return false;
    if (other) {
      if (!(await this.renew())) return 'lost';
      await this.merge(datasetId);
      await store.clear(datasetId);
    }
    // what the report shows until this pass finishes
    const shown: PassState = other
      ? {}
      : {
          ...(state.watermark !== undefined ? { watermark: state.watermark } : {}),
          ...(state.computedAt !== undefined ? { computedAt: state.computedAt } : {}),
          ...(state.embedder !== undefined ? { embedder: state.embedder } : {}),
        };
    const since = shown.embedder === embedder ? shown.watermark : undefined;
    const start = resumed?.started ?? t;
    const first = await reader.processedSince(datasetId, since, resumed?.after, pageSize);
    if (!first.length && since !== undefined && !resumed) return false;
    // a pass under way goes on: waiting again at every slice would stretch it to hours
    if (!resumed && (await this.deps.counts(datasetId)).pending > 0) {
      const waiting = this.busySince.get(datasetId) ?? t;
      this.busySince.set(datasetId, waiting);
      if (t - Math.max(waiting, state.computedAt ?? 0) < BUSY_PASS_EVERY_MS) return false;
    }
    this.busySince.delete(datasetId);
    let page = first;
    let searched = 0;
    while (page.length) {
      for (let i = 0; i < page.length; i += SEARCH_BATCH) {
        const ids = page.slice(i, i + SEARCH_BATCH).map((p) => p.id);
        const found = await this.deps.engine.neighbours(
          datasetId,
          embedder,
          ids,
          MAX_DISTANCE,
          NEIGHBOURS_KEPT,
        );
        const entries = await this.scored(found, embedder);
        const seen = new Set(found.map((f) => f.id));
        // an item listed but no longer searchable (changed meanwhile) loses its old entry
        const gone: NeighbourEntry[] = ids
          .filter((id) => !seen.has(id))
          .map((id) => ({ id, processedAt: 0, neighbours: [] }));
        await store.putEntries(datasetId, [...entries, ...gone]);
        searched += ids.length;
      }
      if (!(await this.renew())) {
        this.deps.log.warn({ datasetId, searched }, 'duplicate pass lease lost; stopped');
        return 'lost';
      }
      if (page.length < pageSize) break;
      const after = page.at(-1)!.id;
      await store.setState(datasetId, { ...shown, progress: { started: start, after, embedder } });
      if (this.halting || now() - t >= (this.deps.sliceMs ?? SLICE_MS)) {
        this.deps.log.debug({ datasetId, searched, after }, 'duplicate pass slice');
        return 'paused';
      }
      page = await reader.processedSince(datasetId, since, after, pageSize);
    }
    await this.prune(datasetId);
    // another process may have taken over during a long prune: its checkpoint stands
    if (!(await this.renew())) return 'lost';
    await store.setState(datasetId, {
      watermark: start - SETTLE_MS,
      computedAt: now(),
      embedder,
    });
    this.deps.log.debug({ datasetId, searched, since: start }, 'duplicate pass');
    return true;
  }

  /**
   * Starts the merge a re-embedding calls for (it wrote every item anew), without waiting: the
   * searches of this pass go on meanwhile, and the other datasets' reports are due. A merge that
   * cannot start leaves searches slower, nothing else.
   */
  private async merge(datasetId: string): Promise<void> {
    try {
      await this.deps.engine.compact(datasetId, async () => false);
    } catch (err) {
      this.deps.log.warn({ err, datasetId }, 'merging the index after a re-embedding failed');
    }
  }

  /**
   * The entries to store: each pair with how well its pictures match, the scoring cut into
   * slices so an API sharing the process keeps answering.
   */
  private async scored(found: FoundNeighbours[], embedder: string): Promise<NeighbourEntry[]> {
    const out: NeighbourEntry[] = [];
    let scored = 0;
    for (const f of found) {
      const neighbours: NeighbourEntry['neighbours'] = [];
      for (const n of f.neighbours) {
        // the same pixels: the exact group reports the pair, so a placeholder picture shared
        // by thousands of items stores no near pairs for a report to read
        if (samePixels(f, n)) continue;
        if (++scored % SCORED_PER_YIELD === 0) await new Promise((r) => setImmediate(r));
        const match = this.matcher.score(f.copySignature, n.copySignature);
        const pair = {
          id: n.id,
          distance: n.distance,
          processedAt: n.processedAt,
          ...(match !== undefined ? { match: Math.round(match * 1e4) / 1e4 } : {}),
        };
        // look-alikes that are no copies at any max_distance are not kept
        if (nearCopy(pair, MAX_DISTANCE, embedder)) neighbours.push(pair);
      }
      out.push({ id: f.id, processedAt: f.processedAt, neighbours });
    }
    return out;
  }

  /** Entries of items no longer processed (deleted, or waiting for a new image) go. */
  private async prune(datasetId: string): Promise<void> {
    const entries = await this.deps.store.entries(datasetId);
    const ids = entries.map((e) => e.id);
    const gone: string[] = [];
    for (let i = 0; i < ids.length; i += 1000) {
      const chunk = ids.slice(i, i + 1000);
      const items = await this.deps.reader.getItems(datasetId, chunk);
      const live = new Set(items.filter((it) => it.state === 'processed').map((it) => it.id));
      gone.push(...chunk.filter((id) => !live.has(id)));
    }
    if (gone.length) await this.deps.store.forget(datasetId, gone);
  }
}

/** How often a worker asks for the lease and looks for datasets with newly processed items. */
const TICK_MS = 5000;

/**
 * Runs the duplicate pass in the background of every worker (one holds the lease at a time).
 * One pass at a time per process; a failed pass is logged and the next tick tries again.
 */
export const startDuplicatePass = (
  pass: DuplicatePass,
  log: Logger,
  tickMs = TICK_MS,
): { stop(): Promise<void> } => startBackgroundPass(pass, log, tickMs, 'duplicate pass');
