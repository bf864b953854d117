import { AppError, invalid } from '../domain/errors';
import { parseActionVars } from '../domain/action-vars';
import type { Dataset } from '../domain/dataset';
import type { Figures, FiguresSpec } from '../domain/figures';
import type { StoredItem } from '../domain/item';
import { LIMITS, RESERVED_FIELDS } from '../domain/limits';
import type { Scalar } from '../domain/metadata';
import type { RequestType } from '../domain/plan';
import type { ItemReader, StoredEmbedding } from '../ports/item-reader';
import type { RateCounter } from '../ports/rate-counter';
import type {
  Facets,
  GroupedSearchRequest,
  RankedSet,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  SimilarRequest,
} from '../ports/search-engine';
import type { Condition } from '../query/ast';
import { parseQ } from '../query/parse';
import { resolveFilters, type FieldCatalogue, type ResolveContext } from '../query/resolve';
import { compileFilterTree, type FilterTree } from '../query/tree';
import type { Principal } from './principal';
import type { ReadinessMemo } from './ready-memo';
import type { ScopePayload } from './scope-payload';
import { rateKeyOf } from './scoped-tokens';

/** Every kind of Vision API request: the billable ones and the free reads. */
export type VisionRequestType = RequestType | 'details' | 'fields' | 'track';

declare const WHERE: unique symbol;

/**
 * A request's conditions as the scope made them: the scoped token's q ANDed with the client's,
 * hidden fields made absent. Only VisionScope.where builds one, and every engine read of the
 * scope takes one, so no condition reaches the engine without the scope.
 */
export interface Where {
  readonly [WHERE]: true;
  /** The client's own conditions (what the analytics report records). */
  readonly client: Condition[];
  readonly all: readonly Condition[];
}

/** What the scope needs from the service that opens it. */
export interface ScopeDeps {
  engine: SearchEngine;
  store: ItemReader;
  rates: RateCounter;
  ready: ReadinessMemo;
  settingsAt: (org: string, name: string) => string;
  now: () => number;
}

/**
 * A field no item can hold: longer than any metadata key may be. A hidden field is renamed to
 * this in conditions and figures, so the engine answers exactly as for a field no item has.
 */
const absent = (field: string): string =>
  `${'\u0000'.repeat(LIMITS.metadataKeyMaxLength + 1)}${field}`;

/** Renames the fields `hidden` says so in conditions, recursively. */
function hideFields(conds: Condition[], hidden: (f: string) => boolean): Condition[] {
  return conds.map((c): Condition => {
    switch (c.kind) {
      case 'match':
      case 'exclude':
      case 'range':
      case 'exists':
        return hidden(c.field) ? { ...c, field: absent(c.field) } : c;
      case 'any':
        return { kind: 'any', of: c.of.map((conj) => hideFields(conj, hidden)) };
      case 'none':
        return { kind: 'none', of: hideFields(c.of, hidden) };
      default:
        return c;
    }
  });
}

const hasText = (conds: readonly Condition[]): boolean =>
  conds.some(
    (c) =>
      c.kind === 'text' ||
      (c.kind === 'any' && c.of.some(hasText)) ||
      (c.kind === 'none' && hasText(c.of)),
  );

/**
 * One Vision API request's view of its dataset (contract §16): the only way a Vision service
 * reaches the engine or the item store. With a dataset token it sees the whole dataset; with a
 * scoped token, every read — results, totals, figures, reads by id, similarity targets — is
 * ANDed with the token's q, and metadata outside the token's `fields` is absent.
 */
export class VisionScope {
  private full?: Promise<FieldCatalogue>;
  private readonly visible?: ReadonlySet<string>;
  private mustConds?: Promise<Condition[]>;

  /** Use openScope. */
  constructor(
    readonly ds: Dataset,
    readonly type: VisionRequestType,
    private readonly deps: ScopeDeps,
    private readonly claims: ScopePayload | undefined,
    /** Settles when the token's `rate` admits the request (or refuses it with a 429). */
    readonly admitted: Promise<void>,
  ) {
    if (claims?.fields) this.visible = new Set(claims.fields);
  }

  /** Whether a metadata field is hidden by the token's `fields` (generated fields never are). */
  hidden = (field: string): boolean =>
    !!this.visible && !this.visible.has(field) && !RESERVED_FIELDS.has(field);

  private fullCatalogue(): Promise<FieldCatalogue> {
    return (this.full ??= this.deps.store.catalogue(this.ds.id));
  }

  /** The dataset's fields and their kinds, hidden ones left out (as for privateMetadata). */
  async catalogue(): Promise<FieldCatalogue> {
    const full = await this.fullCatalogue();
    if (!this.claims?.fields) return full;
    return new Map([...full].filter(([f]) => !this.hidden(f)));
  }

  /** What q, typed filters and figures are checked against: the dataset's rules as seen here. */
  rules(catalogue: FieldCatalogue): ResolveContext {
    const enabled = this.claims?.fields
      ? Object.fromEntries(Object.entries(this.ds.settings.fields).filter(([f]) => !this.hidden(f)))
      : this.ds.settings.fields;
    return { enabled, catalogue, settingsPath: this.deps.settingsAt(this.ds.org, this.ds.name) };
  }

  /** The token's q under the dataset's full rules; a q the settings no longer allow fails closed. */
  private must(): Promise<Condition[]> {
    const q = this.claims?.q;
    if (!q) return Promise.resolve([]);
    return (this.mustConds ??= (async () => {
      const filters = parseQ(q);
      const full = await this.fullCatalogue();
      try {
        const conds = resolveFilters(filters, {
          enabled: this.ds.settings.fields,
          catalogue: full,
          settingsPath: this.deps.settingsAt(this.ds.org, this.ds.name),
        });
        // Wrapped, so that no engine rule acting on a field's own conditions (a disjunctive
        // facet leaves them out) can ever drop the token's.
        return conds.length ? [{ kind: 'any', of: [conds] } as Condition] : [];
      } catch (e) {
        throw invalid(
          `the scoped token's q no longer applies to this dataset (${(e as Error).message}); mint a new token`,
          [{ param: 'token', message: 'q no longer valid' }],
        );
      }
    })());
  }

  /**
   * The request's q (and typed filter) resolved as the client sees the dataset, ANDed with the
   * token's q. `text:` is refused under `fields`: its word index covers every string field.
   */
  async where(q?: string, filter?: FilterTree, catalogue?: FieldCatalogue): Promise<Where> {
    const cat = catalogue ?? (await this.catalogue());
    const rules = this.rules(cat);
    const filters = parseQ(q);
    const client = filters.length ? resolveFilters(filters, rules) : [];
    if (filter) client.push(...compileFilterTree(filter, rules));
    if (this.claims?.fields && hasText(client))
      throw invalid(
        'text: cannot be used with a token limited to some fields (it would search the others too)',
        [{ param: 'q', message: 'no text: with this token' }],
      );
    const seen = this.claims?.fields ? hideFields(client, this.hidden) : client;
    return { client, all: [...(await this.must()), ...seen] } as unknown as Where;
  }

  /** Action variables of the request, the token's uid as user_id unless the request names one. */
  vars(v: string | undefined): Record<string, string> {
    const vars = parseActionVars(v);
    const uid = this.claims?.uid;
    return uid !== undefined && vars.user_id === undefined ? { ...vars, user_id: uid } : vars;
  }

  /**
   * 409 until the dataset has enough processed items (contract §2). The dataset's own token is
   * told how many it has; a scoped token is not (the count would include items outside it).
   */
  async ready(): Promise<void> {
    const { ds, deps } = this;
    const processed =
      (await deps.ready.get(ds.id, async () => (await deps.store.counts(ds.id)).processed)) ?? 0;
    const min = LIMITS.minProcessedForVision;
    if (processed < min)
      throw new AppError(
        'dataset_not_ready',
        this.claims
          ? `dataset '${ds.name}' has fewer than ${min} processed items; the Vision API answers once it has ${min}`
          : `dataset '${ds.name}' has ${processed} processed items; the Vision API needs at least ${min}`,
      );
  }

  /** An item as this request may see it: metadata outside the token's fields left out. */
  private shown = <T extends StoredItem>(item: T): T => {
    if (!this.claims?.fields) return item;
    const metadata = Object.fromEntries(
      Object.entries(item.metadata).filter(([k]) => !this.hidden(k)),
    );
    return { ...item, metadata };
  };

  private shownHits = (hits: ScoredItem[]): ScoredItem[] =>
    this.claims?.fields ? hits.map((h) => ({ ...h, item: this.shown(h.item) })) : hits;

  private name = (field: string): string => (this.hidden(field) ? absent(field) : field);

  async search(w: Where, r: Omit<SearchRequest, 'conditions'>) {
    const found = await this.deps.engine.search(this.ds.id, { ...r, conditions: [...w.all] });
    return { total: found.total, items: found.items.map(this.shown) };
  }

  async searchGroups(w: Where, r: Omit<GroupedSearchRequest, 'conditions'>) {
    const page = await this.deps.engine.searchGroups(this.ds.id, {
      ...r,
      conditions: [...w.all],
    });
    if (!this.claims?.fields) return page;
    return { ...page, groups: page.groups.map((g) => ({ ...g, items: g.items.map(this.shown) })) };
  }

  /** Figures with hidden fields answered as absent ones, under their own names. */
  async figures(w: Where, spec: FiguresSpec): Promise<Figures> {
    if (!this.claims?.fields) return this.deps.engine.figures(this.ds.id, [...w.all], spec);
    const n = this.name;
    const f = await this.deps.engine.figures(this.ds.id, [...w.all], {
      ...spec,
      facets: spec.facets.map((x) => ({ ...x, field: n(x.field) })),
      stats: spec.stats.map(n),
      histograms: spec.histograms.map((h) => ({ ...h, field: n(h.field) }) as typeof h),
      ...(spec.groupBy !== undefined ? { groupBy: n(spec.groupBy) } : {}),
    });
    const back = <V>(r: Record<string, V> | undefined, names: string[]) =>
      r && Object.fromEntries(names.map((name) => [name, r[n(name)]!]));
    return {
      ...(f.facets
        ? {
            facets: back(
              f.facets,
              spec.facets.map((x) => x.field),
            ),
          }
        : {}),
      ...(f.stats ? { stats: back(f.stats, spec.stats) } : {}),
      ...(f.histograms
        ? {
            histograms: back(
              f.histograms,
              spec.histograms.map((h) => h.field),
            ),
          }
        : {}),
    };
  }

  async facets(w: Where, fields: string[]): Promise<Facets> {
    const f = await this.deps.engine.facets(this.ds.id, [...w.all], fields.map(this.name));
    if (!this.claims?.fields) return f;
    return Object.fromEntries(fields.map((name) => [name, f[this.name(name)] ?? {}]));
  }

  groupCounts(w: Where, field: string, values: Scalar[]): Promise<number[]> {
    return this.deps.engine.groupCounts(this.ds.id, [...w.all], this.name(field), values);
  }

  /** Nearest items; `extra` conditions are the service's own (exclude_parent) and only narrow. */
  async similar(
    w: Where,
    r: Omit<SimilarRequest, 'conditions'>,
    extra: readonly Condition[] = [],
  ): Promise<ScoredItem[]> {
    const hits = await this.deps.engine.similar(this.ds.id, {
      ...r,
      conditions: [...w.all, ...hideFields([...extra], this.hidden)],
    });
    return this.shownHits(hits);
  }

  rankedCount(
    w: Where,
    set: Omit<RankedSet, 'conditions'>,
    extra: readonly Condition[] = [],
  ): Promise<number> {
    return this.deps.engine.rankedCount(this.ds.id, {
      ...set,
      conditions: [...w.all, ...hideFields([...extra], this.hidden)],
    });
  }

  async sample(w: Where, limit: number, seed: number): Promise<StoredItem[]> {
    return (await this.deps.engine.sample(this.ds.id, [...w.all], limit, seed)).map(this.shown);
  }

  /**
   * Of `ids`, those the scope holds (processed, matching the token's q), as the search that
   * decided it saw them; undefined when the token has no scope.
   */
  private async inScope(ids: string[]): Promise<Map<string, StoredItem> | undefined> {
    const must = await this.must();
    if (!must.length) return undefined;
    if (!ids.length) return new Map();
    const found = await this.deps.engine.search(this.ds.id, {
      conditions: [...must, { kind: 'ids', ids }],
      sort: { field: 'service_updated_at', order: 'desc' },
      offset: 0,
      limit: ids.length,
    });
    return new Map(found.items.map((i) => [i.id, i]));
  }

  /**
   * Whether the scope holds `item` as read: the search that decided it must have seen the same
   * metadata. On Elasticsearch the item is read realtime while the search sees the last refresh,
   * so an item just moved out of the scope could otherwise be shown with its new metadata.
   */
  private static holds(within: Map<string, StoredItem> | undefined, item: StoredItem): boolean {
    if (!within) return true;
    const seen = within.get(item.id);
    return (
      seen !== undefined &&
      seen.updatedAt === item.updatedAt &&
      JSON.stringify(seen.metadata) === JSON.stringify(item.metadata)
    );
  }

  /** Processed items among `ids` that the scope holds, as seen here; the others are absent. */
  async items(ids: string[]): Promise<Map<string, StoredItem>> {
    const [items, within] = await Promise.all([
      this.deps.store.getItems(this.ds.id, ids),
      this.inScope(ids),
    ]);
    return new Map(
      items
        .filter((i) => i.state === 'processed' && VisionScope.holds(within, i))
        .map((i) => [i.id, this.shown(i)]),
    );
  }

  /**
   * An item and its embedding, or undefined when the scope does not hold it — decided before
   * anything about the item is looked at, so an item outside the scope answers as an unknown one.
   */
  async embedded(
    id: string,
  ): Promise<{ item: StoredItem; embedding: StoredEmbedding } | undefined> {
    const [within, embedding, items] = await Promise.all([
      this.inScope([id]),
      this.deps.store.getEmbedding(this.ds.id, id),
      this.deps.store.getItems(this.ds.id, [id]),
    ]);
    const item = items[0];
    if (!item || !VisionScope.holds(within, item) || !embedding || item.state !== 'processed')
      return undefined;
    return { item: this.shown(item), embedding };
  }

  /** Embeddings of the items among `ids` that the scope holds (explore's journey). */
  async embeddings(ids: string[]): Promise<Array<StoredEmbedding | undefined>> {
    const within = await this.inScope(ids);
    return Promise.all(
      ids.map((id) =>
        !within || within.has(id) ? this.deps.store.getEmbedding(this.ds.id, id) : undefined,
      ),
    );
  }

  /** content/fields=*: the dataset's public field names as seen here, generated ones included. */
  async fieldNames(): Promise<string[]> {
    const names = await this.deps.store.publicFields(this.ds.id);
    return this.claims?.fields ? names.filter((f) => !this.hidden(f)) : names;
  }
}

/**
 * The scope of one request on `ds` (its token already verified against it): the token's
 * `types` decide whether it runs, its `rate` is taken from the shared counter alongside.
 */
export function openScope(
  p: Principal,
  ds: Dataset,
  type: VisionRequestType,
  deps: ScopeDeps,
): VisionScope {
  if (p.kind !== 'scoped') return new VisionScope(ds, type, deps, undefined, ADMITTED);
  const claims = p.token.claims;
  const billable = type !== 'details' && type !== 'fields' && type !== 'track';
  if (billable && claims.types && !claims.types.includes(type))
    throw new AppError(
      'forbidden',
      `this scoped token allows ${claims.types.join(', ')} requests, not ${type}`,
    );
  const admitted =
    claims.rate === undefined
      ? ADMITTED
      : deps.rates.take(rateKeyOf(p.token, ds.id), claims.rate, deps.now()).then((a) => {
          if (!a.admitted)
            throw new AppError(
              'rate_limited',
              `this scoped token allows ${claims.rate} requests per minute; retry in ${a.retryAfterS} s`,
              undefined,
              a.retryAfterS,
            );
        });
  admitted.catch(() => undefined); // observed by the request; here only to not be unhandled
  return new VisionScope(ds, type, deps, claims, admitted);
}

const ADMITTED = Promise.resolve();
