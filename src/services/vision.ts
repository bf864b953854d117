import { ReadinessMemo } from './ready-memo';
import { checkFigures, hasFigures, type FiguresSpec, type Figures } from '../domain/figures';
import { checkGroup, isGeneratedField, type GroupSpec, type ItemGroup } from '../domain/group';
import { invalid } from '../domain/errors';
import { filterTerms, type RequestFacts } from '../domain/report';
import type { StoredItem } from '../domain/item';
import { GENERATED_FIELDS, LIMITS, isServiceTimeField } from '../domain/limits';
import type { ItemReader } from '../ports/item-reader';
import type { RateCounter } from '../ports/rate-counter';
import { openScope, type ScopeDeps, type VisionScope } from './vision-scope';
import type { Facets, SearchEngine, SortOrder } from '../ports/search-engine';
import { arrayFieldProblem, type FieldCatalogue, type ResolveContext } from '../query/resolve';
import type { FilterTree } from '../query/tree';
import type { AuthService } from './auth';
import type { MeteringService } from './metering';
import type { RequestType } from '../domain/plan';
import { visionPage } from './paging';
import type { Principal } from './principal';

/** A paginated search (contract §6) with the §10 figures asked for. */
export interface SearchRequest {
  /** The q filter of contract §5. */
  q?: string;
  /** A typed filter, ANDed with q. */
  filter?: FilterTree;
  /** A metadata field or a generated one; absent means service_updated_at. */
  sort?: string;
  order?: SortOrder;
  page?: number;
  limit?: number;
  figures?: FiguresSpec;
  /** Action variables (`a:search,user_id:…`), recorded with the request. */
  v?: string;
  /** One entry per group of this field (contract §13); `size` items of each. */
  group?: { field?: string; size?: number };
  /** Under group, facets count groups unless this is `items`. */
  facetScope?: 'groups' | 'items';
}

/** Where a dataset's array fields are enabled, named in the errors that send a client there. */
export type SettingsLocation = (org: string, dataset: string) => string;

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
  /** With group: per entry of `items`, its group (items[i] is groups[i].items[0]). */
  groups?: ItemGroup[];
  totalGroups?: number;
  totalGroupsExact?: boolean;
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
  private readonly deps: ScopeDeps;

  constructor(
    store: ItemReader,
    engine: SearchEngine,
    private readonly auth: AuthService,
    private readonly metering: MeteringService,
    settingsAt: SettingsLocation,
    rates: RateCounter,
    ready = new ReadinessMemo(),
    now: () => number = Date.now,
  ) {
    this.deps = { store, engine, rates, ready, settingsAt, now };
  }

  /** Paginated search (request type `search`); REST and GraphQL shape the page their own way. */
  async search(p: Principal, org: string, name: string, r: SearchRequest): Promise<SearchPage> {
    return this.request(p, org, name, 'search', async (scope, bill) => {
      const spec = checkFigures(r.figures ?? NO_FIGURES);
      const wantsFigures = hasFigures(spec);
      // With figures asked for, limit=0 answers the figures alone (contract §10).
      const figuresOnly = wantsFigures && r.limit === 0;
      const { page, limit, offset } = figuresOnly
        ? { page: 1, limit: 0, offset: 0 }
        : visionPage(r);
      const order = r.order ?? 'desc';
      const vars = scope.vars(r.v);
      const catalogue = await scope.catalogue();
      const sort = r.sort === undefined || r.sort === '' ? DEFAULT_SORT : r.sort;
      const sp = sortProblem(sort, catalogue);
      if (sp) throw invalid(sp, [{ param: 'sort', message: sp }]);
      const group = this.group(r.group, catalogue);
      if (r.facetScope !== undefined && !group)
        throw invalid('facet_scope needs group=<field>', [
          { param: 'facet_scope', message: 'only with group' },
        ]);
      const where = await scope.where(r.q, r.filter, catalogue);
      if (wantsFigures) checkFigureFields(spec, scope.rules(catalogue));
      const figureSpec: FiguresSpec =
        group && r.facetScope !== 'items'
          ? { ...spec, groupBy: group.field, exactUpTo: LIMITS.groupExactMax }
          : spec;
      await scope.ready();
      const req = { sort: { field: sort, order }, offset, limit };
      const [found, figures] = await bill(
        vars,
        () =>
          Promise.all([
            group
              ? scope.searchGroups(where, { ...req, group, exactUpTo: LIMITS.groupExactMax })
              : scope.search(where, req),
            wantsFigures ? scope.figures(where, figureSpec) : undefined,
          ]),
        ([f]) => ({
          total: f.total,
          filters: filterTerms(where.client),
          ...(r.sort ? { sort: r.sort } : {}),
        }),
      );
      const rest = { total: found.total, page, limit, ...(figures ? { figures } : {}) };
      if (!('groups' in found)) return { items: found.items, ...rest };
      return {
        ...rest,
        items: found.groups.map((g) => g.items[0]!),
        groups: found.groups,
        totalGroups: found.totalGroups,
        totalGroupsExact: found.totalGroupsExact,
      };
    });
  }

  /** The checked `group` of a request, its field known to the dataset (as a sort field is). */
  group(
    g: { field?: string; size?: number } | undefined,
    catalogue: FieldCatalogue,
  ): GroupSpec | undefined {
    const spec = checkGroup(g?.field, g?.size);
    if (spec && !catalogue.has(spec.field) && !isGeneratedField(spec.field)) {
      const message = `unknown group field '${spec.field}' (no item has it)`;
      throw invalid(message, [{ param: 'group', message }]);
    }
    return spec;
  }

  /**
   * One billable Vision API request of `type`, the one way such work reaches the dataset: its
   * charge starts at once (metering.upfront), its work starts on the dataset as this process
   * last read it (auth.withVisionDataset, which also verifies a scoped token against it), it
   * reads only through its VisionScope, and `bill` is the only way its engine work reaches the
   * client, so no answer skips the confirmation, the charge or the token's rate.
   */
  request<T>(
    p: Principal,
    org: string,
    name: string,
    type: RequestType,
    work: (scope: VisionScope, bill: Bill) => Promise<T>,
  ): Promise<T> {
    return this.metering.upfront(
      p,
      org,
      type,
      (early) =>
        this.auth.withVisionDataset(p, org, name, (ds, confirm) => {
          const scope = openScope(p, ds, type, this.deps);
          return work(scope, (vars, run, facts) =>
            this.metering.billed(
              ds,
              type,
              vars,
              () => confirm(Promise.all([run(), scope.admitted]).then(([r]) => r)),
              facts,
              early,
            ),
          );
        }),
      this.auth.datasetHint(p, org, name),
    );
  }

  /** A free Vision API read (details, fields, track): scoped like every request, never billed. */
  read<T>(
    p: Principal,
    org: string,
    name: string,
    type: 'details' | 'fields' | 'track',
    work: (scope: VisionScope) => Promise<T>,
  ): Promise<T> {
    return this.auth.withVisionDataset(p, org, name, async (ds, confirm) => {
      const scope = openScope(p, ds, type, this.deps);
      // track writes: only once the token is admitted on the current dataset (a refused or
      // stale request must record nothing); the reads run alongside both
      if (type === 'track') return confirm(scope.admitted).then(() => work(scope));
      const [out] = await confirm(Promise.all([work(scope), scope.admitted]));
      return out;
    });
  }

  /** Processed items among `ids`, unique, in the order asked; unknown ids are absent. Not billable. */
  async details(
    p: Principal,
    org: string,
    name: string,
    rawIds: readonly string[],
  ): Promise<StoredItem[]> {
    const ids = [...new Set(rawIds.map((s) => s.trim()).filter(Boolean))];
    if (ids.length === 0)
      throw invalid('ids is required', [{ param: 'ids', message: 'comma-separated item ids' }]);
    if (ids.length > LIMITS.detailsMaxIds)
      throw invalid(`at most ${LIMITS.detailsMaxIds} ids per request; got ${ids.length}`, [
        { param: 'ids', message: 'too many ids' },
      ]);
    return this.read(p, org, name, 'details', async (scope) => {
      const found = await scope.items(ids);
      return ids.flatMap((id) => (found.has(id) ? [found.get(id)!] : []));
    });
  }

  /** The dataset's public field names, generated ones included. Not billable. */
  async fieldNames(p: Principal, org: string, name: string): Promise<string[]> {
    return this.read(p, org, name, 'fields', (scope) => scope.fieldNames());
  }

  /** Value → count of each named field among the items matching q. Not billable. */
  async fieldCounts(
    p: Principal,
    org: string,
    name: string,
    r: { fields: readonly string[]; q?: string },
  ): Promise<Facets> {
    if (r.fields.length === 0)
      throw invalid('fields is required: a comma-separated list of fields, or *', [
        { param: 'fields', message: 'required' },
      ]);
    return this.read(p, org, name, 'fields', async (scope) =>
      scope.facets(await scope.where(r.q), [...r.fields]),
    );
  }
}

const NO_FIGURES: FiguresSpec = {
  facets: [],
  facetSize: LIMITS.facetSizeDefault,
  stats: [],
  histograms: [],
};

/** Array fields follow the q rule (contract §5): facets count values, stats and histograms numbers. */
function checkFigureFields(spec: FiguresSpec, ctx: ResolveContext): void {
  const need = (param: string, field: string, all: boolean): void => {
    const problem = arrayFieldProblem(ctx, field, all);
    if (problem) throw invalid(`${param}: ${problem}`, [{ param, field, message: problem }]);
  };
  for (const f of spec.facets) need('facets', f.field, false);
  for (const f of spec.stats) need('stats', f, true);
  for (const h of spec.histograms) if (!('calendar' in h)) need('histogram', h.field, true);
}
