import { ReadinessMemo } from './readiness';
import {
  checkAnalytics,
  hasAnalytics,
  parseAnalytics,
  type AnalyticsSpec,
  type Figures,
} from '../domain/analytics';
import { AppError, invalid } from '../domain/errors';
import { filterTerms, type RequestFacts } from '../domain/event-report';
import type { Dataset } from '../domain/dataset';
import type { StoredItem } from '../domain/item';
import { parseActionVars } from '../domain/action-vars';
import { GENERATED_FIELDS, LIMITS, isServiceTimeField } from '../domain/limits';
import type { ContentStore } from '../ports/content-store';
import type { Facets, SearchEngine, SortOrder } from '../ports/search-engine';
import type { Condition } from '../query/ast';
import { parseQ } from '../query/parse';
import {
  arrayFieldProblem,
  resolveFilters,
  type FieldCatalogue,
  type ResolveContext,
} from '../query/resolve';
import { compileFilterTree, type FilterTree } from '../query/tree';
import type { AuthService } from './auth';
import type { MeteringService } from './metering';
import type { RequestType } from '../domain/plan';
import { datasetPath } from './datasets';
import { visionPage } from './paging';
import type { RequestContext } from './principal';
import { parseFieldSelection } from './results';

export interface SearchParams {
  page?: number;
  limit?: number;
  sort?: string;
  order?: string;
  q?: string;
  v?: string;
  /** Contract §10 analytics. */
  facets?: string;
  facet_size?: string | number;
  disjunctive?: string;
  stats?: string;
  histogram?: string;
  /** The same analytics, typed (GraphQL): replaces the string parameters above. */
  analytics?: AnalyticsSpec;
  /** A typed filter (GraphQL), ANDed with q. */
  filter?: FilterTree;
}

/**
 * Runs a Vision request's engine work as its one billable call: charged once (the charge
 * started with the request), and handed back only once the dataset's realtime read has
 * confirmed the copy the request was built on.
 */
export type Bill = <R>(
  vars: Record<string, string>,
  run: () => Promise<R>,
  facts?: (result: R) => RequestFacts,
) => Promise<R>;

/** A page of search results with the figures asked for (contract §6, §10). */
export interface SearchPage {
  items: StoredItem[];
  /** All items matching the conditions, not the page. */
  total: number;
  page: number;
  limit: number;
  figures?: Figures;
}

const DEFAULT_SORT = 'service_updated_at';

function sortProblem(field: string, catalogue: FieldCatalogue): string | undefined {
  if (isServiceTimeField(field) || (GENERATED_FIELDS as readonly string[]).includes(field))
    return undefined;
  const kinds = catalogue.get(field);
  if (!kinds) return `unknown sort field '${field}' (no item has it)`;
  if (!kinds.has('string') && !kinds.has('number'))
    return `sort field '${field}' holds ${[...kinds].join(', ')} values; only string or number fields can be sorted`;
  return undefined;
}

/** The Vision API's non-visual reads: paginated search, content/details, content/fields. */
export class VisionService {
  constructor(
    private readonly store: ContentStore,
    private readonly engine: SearchEngine,
    private readonly auth: AuthService,
    private readonly metering: MeteringService,
    private readonly ready = new ReadinessMemo(),
  ) {}

  /** Parses and resolves q against the dataset's enabled fields and field types. */
  async conditions(
    ds: Dataset,
    q: string | undefined,
    catalogue?: FieldCatalogue,
  ): Promise<Condition[]> {
    const filters = parseQ(q);
    if (filters.length === 0) return [];
    return resolveFilters(filters, rules(ds, catalogue ?? (await this.store.catalogue(ds.id))));
  }

  /** 409 until the dataset holds enough processed items for the Vision API (contract §2). */
  async requireReady(ds: Dataset): Promise<void> {
    const processed =
      (await this.ready.get(ds.id, async () => (await this.store.counts(ds.id)).processed)) ?? 0;
    if (processed < LIMITS.minProcessedForVision)
      throw new AppError(
        'dataset_not_ready',
        `dataset '${ds.name}' has ${processed} processed items; the Vision API needs at least ${LIMITS.minProcessedForVision}`,
      );
  }

  /** Paginated search (request type `search`); REST and GraphQL shape the page their own way. */
  async search(
    ctx: RequestContext,
    org: string,
    name: string,
    p: SearchParams,
  ): Promise<SearchPage> {
    return this.request(ctx, org, name, 'search', async (ds, bill) => {
      const spec = p.analytics ? checkAnalytics(p.analytics) : parseAnalytics(p);
      const analytics = hasAnalytics(spec);
      // With figures asked for, limit=0 answers the figures alone (contract §10).
      const figuresOnly = analytics && p.limit === 0;
      const { page, limit, offset } = figuresOnly
        ? { page: 1, limit: 0, offset: 0 }
        : visionPage(p);
      const order = (p.order ?? 'desc') as SortOrder;
      if (order !== 'asc' && order !== 'desc')
        throw invalid("order must be 'asc' or 'desc'", [
          { param: 'order', message: "expected 'asc' or 'desc'" },
        ]);
      const vars = parseActionVars(p.v);
      const catalogue = await this.store.catalogue(ds.id);
      const sort = p.sort === undefined || p.sort === '' ? DEFAULT_SORT : p.sort;
      const sp = sortProblem(sort, catalogue);
      if (sp) throw invalid(sp, [{ param: 'sort', message: sp }]);
      const conditions = await this.conditions(ds, p.q, catalogue);
      if (p.filter) conditions.push(...compileFilterTree(p.filter, rules(ds, catalogue)));
      if (analytics) checkAnalyticsFields(spec, rules(ds, catalogue));
      await this.requireReady(ds);
      const [{ items, total }, figures] = await bill(
        vars,
        () =>
          Promise.all([
            this.engine.search(ds.id, { conditions, sort: { field: sort, order }, offset, limit }),
            analytics ? this.engine.analytics(ds.id, conditions, spec) : undefined,
          ]),
        ([r]) => ({
          total: r.total,
          filters: filterTerms(conditions),
          ...(p.sort ? { sort: p.sort } : {}),
        }),
      );
      return { items, total, page, limit, ...(figures ? { figures } : {}) };
    });
  }

  /**
   * One Vision API request of `type`: its charge starts at once (metering.upfront), its work
   * starts on the dataset as this process last read it (auth.withVisionDataset), and `bill`
   * is the only way its engine work reaches the client, so no answer skips the confirmation.
   */
  request<T>(
    ctx: RequestContext,
    org: string,
    name: string,
    type: RequestType,
    work: (ds: Dataset, bill: Bill) => Promise<T>,
  ): Promise<T> {
    return this.metering.upfront(ctx.principal, org, type, (early) =>
      this.auth.withVisionDataset(ctx.principal, org, name, (ds, confirm) =>
        work(ds, (vars, run, facts) =>
          this.metering.billed(ds, type, vars, () => confirm(run()), facts, early),
        ),
      ),
    );
  }

  /** Processed items among `ids`, unique, in the order asked; unknown ids are absent. Not billable. */
  async details(
    ctx: RequestContext,
    org: string,
    name: string,
    rawIds: string[],
  ): Promise<StoredItem[]> {
    const ds = await this.auth.visionDataset(ctx.principal, org, name);
    const ids = [...new Set(rawIds.map((s) => s.trim()).filter(Boolean))];
    if (ids.length === 0)
      throw invalid('ids is required', [{ param: 'ids', message: 'comma-separated item ids' }]);
    if (ids.length > LIMITS.detailsMaxIds)
      throw invalid(`at most ${LIMITS.detailsMaxIds} ids per request; got ${ids.length}`, [
        { param: 'ids', message: 'too many ids' },
      ]);
    const found = new Map(
      (await this.store.getItems(ds.id, ids))
        .filter((i) => i.state === 'processed')
        .map((i) => [i.id, i]),
    );
    return ids.flatMap((id) => (found.has(id) ? [found.get(id)!] : []));
  }

  /** content/fields: `*` lists field names; named fields get value → count under q. Not billable. */
  async fields(
    ctx: RequestContext,
    org: string,
    name: string,
    p: { fields?: string | string[]; q?: string },
  ): Promise<string[] | Facets> {
    const ds = await this.auth.visionDataset(ctx.principal, org, name);
    const sel = parseFieldSelection(p.fields);
    if (!sel.all && sel.names.length === 0)
      throw invalid('fields is required: a comma-separated list of fields, or *', [
        { param: 'fields', message: 'required' },
      ]);
    const conditions = await this.conditions(ds, p.q);
    if (sel.all) return this.store.publicFields(ds.id);
    return this.engine.facets(ds.id, conditions, sel.names);
  }
}

/** What q, typed filters and analytics are checked against: the dataset's field rules. */
const rules = (ds: Dataset, catalogue: FieldCatalogue): ResolveContext => ({
  enabled: ds.settings.fields,
  catalogue,
  settingsPath: `${datasetPath(ds.org, ds.name)}/settings/fields`,
});

/** Array fields follow the q rule (contract §5): facets count values, stats and histograms numbers. */
function checkAnalyticsFields(spec: AnalyticsSpec, ctx: ResolveContext): void {
  const need = (param: string, field: string, all: boolean): void => {
    const problem = arrayFieldProblem(ctx, field, all);
    if (problem) throw invalid(`${param}: ${problem}`, [{ param, field, message: problem }]);
  };
  for (const f of spec.facets) need('facets', f.field, false);
  for (const f of spec.stats) need('stats', f, true);
  for (const h of spec.histograms) if (!('calendar' in h)) need('histogram', h.field, true);
}
