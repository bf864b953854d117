import type { FiguresSpec, Figures } from '../../domain/figures';
import type { GroupedPage } from '../../domain/group';
import type { Scalar } from '../../domain/metadata';
import type { StoredItem } from '../../domain/item';
import type {
  Facets,
  FoundNeighbours,
  GroupedSearchRequest,
  RankedSet,
  ScoredItem,
  SearchEngine,
  SearchRequest,
  SimilarRequest,
  TunedQuery,
  ActiveProjection,
  TuningPage,
} from '../../ports/search-engine';
import type { Condition } from '../../query/ast';
import { esFigures } from './figures';
import { groupCounts, groupFacets, searchGroups, type Search } from './groups';
import { fromDoc, type ItemDoc } from './document';
import { facetsBody, sampleBody, searchBody, type Dsl } from './dsl';
import { approximate, exact, rankedCount } from './similar';
import { allBlended, tunedSimilar } from './similar-tuned';
import { EsTunedVectors } from './tuned-vectors';
import { mergeSegments } from './compaction';
import { nearPairs } from './near-pairs';
import { ItemIndex, orEmpty } from './item-index';
import { keyed } from '../../domain/keyed';
import { RecentReads } from '../../lib/recent-reads';

/**
 * How long this process trusts that every item of a dataset has its blend vector: an item
 * written without one (a worker that read the setting before a new fit) ranks within this long
 * of becoming visible, and the pass gives it the vector within its own tick.
 */
const ALL_BLENDED_MS = 1000;

type Bucket = { key: string | number; doc_count: number };
type FacetAggs = Record<string, { sel: { s: { buckets: Bucket[] }; n: { buckets: Bucket[] } } }>;

/**
 * SearchEngine on Elasticsearch 8: the bodies come from dsl.ts (pure, pinned by golden files);
 * this sends them to the dataset's index and reads the answers. A dataset without an index
 * answers as empty.
 */
export class EsSearchEngine extends ItemIndex implements SearchEngine {
  async search(
    datasetId: string,
    req: SearchRequest,
  ): Promise<{ items: StoredItem[]; total: number }> {
    return orEmpty(
      async () => {
        const r = await this.query(datasetId, searchBody(req));
        return {
          items: r.hits.hits.map((h) => fromDoc(h._source!)),
          total: (r.hits.total as { value: number }).value,
        };
      },
      { items: [], total: 0 },
    );
  }

  searchGroups(datasetId: string, req: GroupedSearchRequest): Promise<GroupedPage> {
    return orEmpty(() => searchGroups(this.searcher(datasetId), req), {
      groups: [],
      total: 0,
      totalGroups: 0,
      totalGroupsExact: true,
    });
  }

  groupCounts(
    datasetId: string,
    conditions: Condition[],
    field: string,
    values: Scalar[],
  ): Promise<number[]> {
    return orEmpty(
      () => groupCounts(this.searcher(datasetId), conditions, field, values),
      values.map(() => 0),
    );
  }

  /** Identical reads under way: a grouped search's totals and its facets' ask the same. */
  private readonly inFlight = new Map<string, Promise<never>>();

  /**
   * Reads of the dataset's index for the grouping module. A read identical to one still under
   * way shares its answer (read-only, same index, same moment), nothing is kept afterwards.
   */
  private searcher(datasetId: string): Search {
    return (body, filterPath) => {
      const key = JSON.stringify([datasetId, body, filterPath]);
      const had = this.inFlight.get(key);
      if (had) return had;
      const read = (
        this.client.search<ItemDoc>({
          index: this.index(datasetId),
          ...body,
          ...(filterPath ? { filter_path: filterPath } : {}),
        } as never) as Promise<never>
      ).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, read);
      return read;
    };
  }

  /** Per dataset and projection, whether every item had its blend vector a moment ago. */
  private readonly blended = new RecentReads<boolean>(ALL_BLENDED_MS, Date.now, () => true);

  similar(datasetId: string, req: SimilarRequest): Promise<ScoredItem[]> {
    const search = this.searcher(datasetId);
    const t = req.tuning;
    return orEmpty(
      () =>
        t
          ? tunedSimilar(search, req, () => this.allBlended(datasetId, search, t, req.embedder))
          : req.exact
            ? exact(search, req)
            : approximate(search, req),
      [],
    );
  }

  /** Whether every item has its blend vector of `t`, as this process read it a moment ago. */
  private async allBlended(
    datasetId: string,
    search: Search,
    t: TunedQuery,
    embedder: string,
  ): Promise<boolean> {
    const key = `${datasetId}\u0000${t.model}\u0000${embedder}`;
    const all = await this.blended
      .get(key, () => allBlended(search, t, embedder))
      // unknown is not all: the search for the rest runs
      .catch(() => false);
    return all === true;
  }

  private readonly tunedVectors = new EsTunedVectors(this.indices);

  applyTuning(
    datasetId: string,
    embedder: string,
    dims: number,
    tuning: ActiveProjection,
    after: string | undefined,
    limit: number,
  ): Promise<TuningPage> {
    return this.tunedVectors.apply(datasetId, embedder, dims, tuning, after, limit);
  }

  compact(datasetId: string, keepWaiting: () => Promise<boolean>): Promise<boolean> {
    return orEmpty(() => mergeSegments(this.client, this.index(datasetId), keepWaiting), true);
  }

  rankedCount(datasetId: string, set: RankedSet): Promise<number> {
    return orEmpty(() => rankedCount(this.searcher(datasetId), set), 0);
  }

  neighbours(
    datasetId: string,
    embedder: string,
    ids: readonly string[],
    maxDistance: number,
    k: number,
  ): Promise<FoundNeighbours[]> {
    return orEmpty(
      () => nearPairs(this.client, this.index(datasetId), embedder, ids, maxDistance, k),
      [],
    );
  }

  async sample(
    datasetId: string,
    conditions: Condition[],
    limit: number,
    seed: number,
  ): Promise<StoredItem[]> {
    return orEmpty(async () => {
      const r = await this.query(datasetId, sampleBody(conditions, limit, seed));
      return r.hits.hits.map((h) => fromDoc(h._source!));
    }, []);
  }

  async facets(datasetId: string, conditions: Condition[], fields: string[]): Promise<Facets> {
    const out: Facets = keyed();
    for (const f of fields) out[f] = keyed();
    if (!fields.length) return out;
    const aggs = await orEmpty(
      async () =>
        (await this.query(datasetId, facetsBody(conditions, fields))).aggregations as FacetAggs,
      undefined,
    );
    if (!aggs) return out;
    fields.forEach((f, i) => {
      const counts = keyed<number>();
      for (const b of [...aggs[`f${i}`].sel.s.buckets, ...aggs[`f${i}`].sel.n.buckets])
        counts[String(b.key)] = (counts[String(b.key)] ?? 0) + b.doc_count;
      out[f] = counts;
    });
    return out;
  }

  async figures(datasetId: string, conditions: Condition[], spec: FiguresSpec): Promise<Figures> {
    const { groupBy } = spec;
    if (groupBy !== undefined && spec.facets.length) {
      const [rest, facets] = await Promise.all([
        this.figures(datasetId, conditions, { ...spec, facets: [], groupBy: undefined }),
        orEmpty(() => groupFacets(this.searcher(datasetId), conditions, { ...spec, groupBy }), {}),
      ]);
      return {
        facets: Object.fromEntries(spec.facets.map((f) => [f.field, facets[f.field]!])),
        ...rest,
      };
    }
    return esFigures(
      (body) =>
        orEmpty(
          async () => (await this.query(datasetId, body)).aggregations as Record<string, unknown>,
          undefined,
        ),
      conditions,
      spec,
    );
  }

  private query(datasetId: string, body: Dsl) {
    return this.client.search<ItemDoc>({ index: this.index(datasetId), ...body } as never);
  }
}
