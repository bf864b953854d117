import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { Dataset } from '../domain/dataset';
import { deserialise, type Labelled, type Projection } from '../domain/tuning/lda';
import { startBackgroundPass } from './background-pass';
import { fitInThread } from './tuning-fit';
import {
  MIN_CLASSES,
  MIN_CLASS_ITEMS,
  MIN_GAIN,
  NOISE_ERRORS,
  REFIT_CHANGE,
  labelChange,
  usableLabels,
  type SimilaritySettings,
} from '../domain/tuning/settings';
import type { AccountStore } from '../ports/account-store';
import type { ItemReader } from '../ports/item-reader';
import type { SearchEngine } from '../ports/search-engine';
import type { TuningStore } from '../ports/tuning-store';

/** How long the installation-wide fitting lease lasts without renewal. */
const LEASE_MS = 60_000;
/** Items read per page while collecting a fit's items. */
const PAGE = 500;
/**
 * Labelled items a fit keeps in memory at most (about 5.7 KB each at 1,420 dimensions): past
 * it each label keeps its share, chosen by a hash of the id, so a refit of the same items
 * learns from the same ones.
 */
const MAX_FIT_ITEMS = 20_000;
/** Items brought up to date per call where an engine stores projections (Elasticsearch). */
const APPLY_PAGE = 500;
/**
 * Labels a fit learns from at most, the largest first: the fit's cost grows with the cube of
 * the labels (docs/embedders.md), and its projection keeps at most 64 directions anyway.
 */
const MAX_LABELS = 64;
/**
 * How long a fit waits for the engine to merge what its rewrite left before it lands anyway
 * (the merge goes on): minutes at 100,000 items, growing with them (docs/engines.md).
 */
const COMPACT_WAIT_MS = 10 * 60_000;
/** Fits that failed (a thread error) before the setting lands `inactive` with the error. */
const MAX_FAILURES = 3;
/** The first wait after a failed fit; doubled after each. */
const FAILURE_BACKOFF_MS = 30_000;
/** The counts key of every label a fit does not learn from, summed. */
const OTHER = '\u0000other';

export interface TuningPassDeps {
  store: TuningStore;
  accounts: Pick<AccountStore, 'updateSimilarity'>;
  reader: Pick<ItemReader, 'vectorsPage'>;
  engine: Pick<SearchEngine, 'facets' | 'applyTuning' | 'compact'>;
  datasets: () => Promise<Dataset[]>;
  /** Processed items of the dataset still waiting for a vector by `embedder` (re-embedding). */
  waitingForEmbedder: (datasetId: string, embedder: string) => Promise<number>;
  now: () => number;
  log: Logger;
  /** This process, as the lease names it. */
  owner: string;
  maxFitItems?: number;
}

/** A share of [0, 1) from an id, the same on every host. */
const share = (id: string): number =>
  crypto.createHash('sha1').update(id).digest().readUInt32BE(0) / 2 ** 32;

/**
 * Keeps every dataset's tuned similarity current (contract §20): one process of the
 * installation holds the lease and fits what was asked for (`fitting`) or whose labelled items
 * moved by REFIT_CHANGE since the last fit, then keeps stored projections current where the
 * engine stores them. A fit lands only if the setting is still the one it began under.
 */
export class TuningPass {
  private halting = false;

  constructor(private readonly deps: TuningPassDeps) {}

  /** One look at every dataset; false when another process holds the lease. */
  async pass(): Promise<boolean> {
    if (!(await this.renew())) return false;
    for (const ds of await this.deps.datasets()) {
      if (this.halting) break;
      const s = ds.similarity;
      if (!s?.learnFrom || !ds.embedder) continue;
      if ((this.failures.get(ds.id)?.until ?? 0) > this.deps.now()) continue;
      // a long fit of the previous dataset may have outlasted the lease
      if (!(await this.renew())) return true;
      try {
        await this.dataset(ds, s);
        this.failures.delete(ds.id);
      } catch (err) {
        await this.failed(ds, s, err);
      }
    }
    return true;
  }

  /** Per dataset, failed fits in a row and when to try again (this process's own backoff). */
  private readonly failures = new Map<string, { count: number; until: number }>();

  /** A failed fit is tried again later; after MAX_FAILURES it lands `inactive`, saying why. */
  private async failed(ds: Dataset, s: SimilaritySettings, err: unknown): Promise<void> {
    const count = (this.failures.get(ds.id)?.count ?? 0) + 1;
    this.failures.set(ds.id, {
      count,
      until: this.deps.now() + FAILURE_BACKOFF_MS * 2 ** (count - 1),
    });
    this.deps.log.warn({ err, datasetId: ds.id, count }, 'similarity fit failed');
    if (count < MAX_FAILURES || s.state !== 'fitting') return;
    await this.inactive(ds, s, {
      embedder: ds.embedder!.id,
      labelledItems: 0,
      classes: 0,
      cv: null,
      fittedAt: new Date(this.deps.now()).toISOString(),
      reason: `the fit failed ${count} times: ${(err as Error).message ?? String(err)}`,
    }).catch(() => undefined);
    this.failures.delete(ds.id);
  }

  halt(): void {
    this.halting = true;
  }

  private renew(): Promise<boolean> {
    const t = this.deps.now();
    return this.deps.store.claim(this.deps.owner, t, t + LEASE_MS);
  }

  /** Fits when due; otherwise keeps the active projection's stored copies current. */
  async dataset(ds: Dataset, s: SimilaritySettings): Promise<void> {
    const field = s.learnFrom!;
    const embedder = ds.embedder!.id;
    // after an embedder change, the fit waits for every item's new vector
    if ((await this.deps.waitingForEmbedder(ds.id, embedder)) > 0) return;
    const counts = await this.labelCounts(ds.id, field);
    const due =
      s.state === 'fitting' ||
      (s.embedder !== undefined && s.embedder !== embedder) ||
      labelChange(s.labelCounts ?? {}, summary(counts, learned(counts))) >= REFIT_CHANGE;
    if (due) await this.fit(ds, s, counts);
    else if (s.state === 'active' && s.model) await this.apply(ds, s.model);
  }

  /** Processed items per label of the field, as the engine counts them. */
  private async labelCounts(datasetId: string, field: string): Promise<Record<string, number>> {
    const facets = await this.deps.engine.facets(datasetId, [], [field]);
    return { ...(facets[field] ?? {}) };
  }

  private async fit(
    ds: Dataset,
    s: SimilaritySettings,
    counts: Record<string, number>,
  ): Promise<void> {
    const started = this.deps.now();
    const labels = learned(counts);
    const { items, labelled } = await this.collect(ds, s.learnFrom!, counts, labels);
    const classes = usableLabels(tally(items)).length;
    const base = () => ({
      embedder: ds.embedder!.id,
      labelledItems: labelled,
      classes,
      labelCounts: summary(counts, labels),
      fittedAt: new Date(this.deps.now()).toISOString(),
    });
    if (classes < MIN_CLASSES) {
      await this.inactive(ds, s, {
        ...base(),
        reason: `needs at least ${MIN_CLASSES} labels of '${s.learnFrom}' with ${MIN_CLASS_ITEMS} processed items each; found ${classes}`,
        cv: null,
      });
      return;
    }
    const fitted = await this.holdingLease(() => fitInThread(items, s.weight));
    if (!fitted) return;
    const { cv } = fitted;
    const figures = { plain: round(cv.plain), tuned: round(cv.tuned) };
    // a gain within chance of the queries asked is no gain: random labels measure ± noise
    const bar = Math.max(MIN_GAIN, NOISE_ERRORS * cv.gainError);
    if (cv.tuned - cv.plain < bar) {
      await this.inactive(ds, s, {
        ...base(),
        reason: `held-out precision@10 tuned ${figures.tuned} does not beat plain ${figures.plain} by ${round(bar)} (${MIN_GAIN}, or twice the gain's standard error ${round(cv.gainError)})`,
        cv: figures,
      });
      return;
    }
    // the same items fit the same projection: a new weight keeps the stored one and its copies
    const previous = s.model && (await this.deps.store.getModel(ds.id, s.model));
    const same = previous && Buffer.compare(Buffer.from(previous), Buffer.from(fitted.model)) === 0;
    const model = same ? s.model! : crypto.randomUUID();
    const projection = deserialise(fitted.model);
    if (!same) await this.deps.store.putModel(ds.id, model, fitted.model);
    // where the engine stores projections, every item gets this one before it ranks, and the
    // index is merged after the rewrite so that tuned searches do not begin on its leftovers
    const rewritten = await this.apply(ds, model, projection);
    const landed =
      rewritten !== undefined &&
      (rewritten === 0 || (await this.compact(ds))) &&
      (await this.renew()) &&
      (await this.land(ds, s, { ...base(), state: 'active', reason: null, cv: figures, model }));
    // only a fit that landed cleans up: a process that lost the lease could otherwise delete
    // the projection of the process that took it over (a landing removes any left behind)
    if (landed) await this.deps.store.pruneModels(ds.id, [model]);
    this.deps.log.info(
      {
        datasetId: ds.id,
        items: items.length,
        classes,
        ms: this.deps.now() - started,
        cv: figures,
        landed,
      },
      'similarity fitted',
    );
  }

  /** Runs `work` renewing the lease meanwhile; undefined when the lease was lost on the way. */
  private async holdingLease<T>(work: () => Promise<T>): Promise<T | undefined> {
    let lost = false;
    const timer = setInterval(() => {
      this.renew().then(
        (held) => (lost ||= !held),
        () => undefined,
      );
    }, LEASE_MS / 4);
    try {
      const out = await work();
      return lost || !(await this.renew()) ? undefined : out;
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Brings every stored projection of `model` up to date, in sweeps of the items in id order
   * until one sweep changes nothing (a search may not see the last writes yet, so an item is
   * counted only when it was written, or written by another meanwhile); how many items it
   * wrote, or undefined when the lease was lost or the process is stopping (the next pass goes
   * on).
   */
  private async apply(
    ds: Dataset,
    model: string,
    fitted?: Projection,
  ): Promise<number | undefined> {
    const projection = fitted ?? (await this.projection(ds.id, model));
    if (!projection) return undefined;
    let after: string | undefined;
    let changed = 0;
    let written = 0;
    for (;;) {
      const page = await this.deps.engine.applyTuning(
        ds.id,
        ds.embedder!.id,
        ds.embedder!.dimensions,
        { model, projection },
        after,
        APPLY_PAGE,
      );
      changed += page.changed;
      written += page.changed;
      after = page.next;
      if (after === undefined) {
        if (changed === 0) return written;
        changed = 0;
      }
      if (this.halting || !(await this.renew())) return undefined;
    }
  }

  /**
   * Asks the engine to merge the dataset's index after a rewrite, holding the lease for at most
   * COMPACT_WAIT_MS; false when the lease was lost. A process that is stopping stops waiting
   * and lands its rewrite, and a merge that fails is only slower searches: both land the same.
   */
  private async compact(ds: Dataset): Promise<boolean> {
    const until = this.deps.now() + COMPACT_WAIT_MS;
    let held = true;
    const keepWaiting = async () =>
      !this.halting && this.deps.now() < until && (held = await this.renew());
    try {
      await this.deps.engine.compact(ds.id, keepWaiting);
    } catch (err) {
      this.deps.log.warn({ err, datasetId: ds.id }, 'merging the index after a rewrite failed');
    }
    return held;
  }

  private async projection(datasetId: string, model: string): Promise<Projection | undefined> {
    const bytes = await this.deps.store.getModel(datasetId, model);
    return bytes && deserialise(bytes);
  }

  /** A fit that does not turn tuning on: its reason lands, and no stored projection is kept. */
  private async inactive(
    ds: Dataset,
    s: SimilaritySettings,
    found: Omit<SimilaritySettings, 'learnFrom' | 'weight' | 'revision' | 'state'>,
  ): Promise<void> {
    if (await this.land(ds, s, { ...found, state: 'inactive' }))
      await this.deps.store.pruneModels(ds.id, []);
  }

  /** Writes what a fit found, unless the setting changed since it began. */
  private async land(
    ds: Dataset,
    s: SimilaritySettings,
    found: Omit<SimilaritySettings, 'learnFrom' | 'weight' | 'revision'>,
  ): Promise<boolean> {
    let landed = false;
    await this.deps.accounts.updateSimilarity(ds.id, (cur) => {
      if (cur.revision !== s.revision || cur.learnFrom !== s.learnFrom) return undefined;
      landed = true;
      const { model: _replaced, ...rest } = cur;
      return { ...rest, ...found };
    });
    return landed;
  }

  /**
   * The items a fit learns from: those of `labels`, each label kept to its share past
   * MAX_FIT_ITEMS (chosen by a hash of the id, so a refit of the same items learns from the same
   * ones); and how many items carry any label.
   */
  private async collect(
    ds: Dataset,
    field: string,
    counts: Record<string, number>,
    labels: ReadonlySet<string>,
  ): Promise<{ items: Labelled[]; labelled: number }> {
    const max = this.deps.maxFitItems ?? MAX_FIT_ITEMS;
    const budget = max / Math.max(1, labels.size);
    const keep = (label: string): number =>
      labels.has(label) ? Math.min(1, budget / Math.max(1, counts[label] ?? 1)) : 0;
    const items: Labelled[] = [];
    let labelled = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.deps.reader.vectorsPage(ds.id, ds.embedder!.id, field, after, PAGE);
      for (const it of page.items) {
        if (it.label === undefined) continue;
        labelled++;
        if (items.length < max && share(it.id) < keep(it.label))
          items.push({ vector: it.vector, label: it.label, group: it.pixelHash ?? it.id });
      }
      if (page.next === undefined) return { items, labelled };
      after = page.next;
      if (!(await this.renew())) throw new Error('the fitting lease went to another process');
    }
  }
}

const round = (x: number): number => Math.round(x * 1e4) / 1e4;

/** The labels a fit learns from: the MAX_LABELS with most items of those with enough. */
function learned(counts: Record<string, number>): Set<string> {
  return new Set(
    usableLabels(counts)
      .sort((a, b) => counts[b]! - counts[a]! || (a < b ? -1 : 1))
      .slice(0, MAX_LABELS),
  );
}

/**
 * What the setting keeps of the counts to see a refit coming: the learned labels' counts by a
 * short hash of the label (labels may be long), the rest summed.
 */
function summary(counts: Record<string, number>, labels: ReadonlySet<string>) {
  const out: Record<string, number> = {};
  for (const [label, n] of Object.entries(counts)) {
    const key = labels.has(label)
      ? crypto.createHash('sha1').update(label).digest('base64url').slice(0, 12)
      : OTHER;
    out[key] = (out[key] ?? 0) + n;
  }
  return out;
}

function tally(items: readonly Labelled[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const it of items) out[it.label] = (out[it.label] ?? 0) + 1;
  return out;
}

/** How often a worker asks for the lease and looks for fits that are due. */
const TICK_MS = 5000;

/** Runs the pass in the background of every worker (one holds the lease at a time). */
export const startTuningPass = (
  pass: TuningPass,
  log: Logger,
  tickMs = TICK_MS,
): { stop(): Promise<void> } => startBackgroundPass(pass, log, tickMs, 'similarity pass');
