import crypto from 'node:crypto';
import { AppError, invalid } from '../domain/errors';
import type { StoredItem } from '../domain/item';
import { filterTerms, type RequestFacts } from '../domain/report';
import { groupKey, groupValue, type GroupSpec } from '../domain/group';
import { checkDiscovery, type Discovery, type DiscoveryParams } from '../domain/discovery';
import { checkJourney, diversify, steer } from '../domain/journey';
import { LIMITS } from '../domain/limits';
import type { Scalar } from '../domain/metadata';
import { ImageError } from '../domain/processing';
import type { ImageAnalyzer } from '../ports/image-analyzer';
import type { Condition } from '../query/ast';
import type { Principal } from './principal';
import { Ranking, centroidQuery, type RankingScope } from './ranking';
import { withinGroup, type ScoredGroup } from './similar-groups';
import type { TunedModels } from './tuned-models';
import type { Bill, VisionService } from './vision';
import type { VisionScope, Where } from './vision-scope';

/** What every similarity request takes besides its target (contract §7, §15). */
interface SimilarityParams extends DiscoveryParams {
  limit?: number;
  q?: string;
  v?: string;
  /** One entry per group of this field (contract §13); `size` items of each. */
  group?: { field?: string; size?: number };
}

export interface SimilarRequest extends SimilarityParams {
  id?: string;
  /** Leave out items sharing the target's `parent` value. */
  excludeParent?: boolean;
}

export interface ExploreRequest extends SimilarityParams {
  /** Absent for a random start. */
  id?: string;
  /** The journey's earlier selections, oldest first. */
  path?: readonly string[];
}

export interface CollectionRequest extends SimilarityParams {
  ids: readonly string[];
  /** Items to steer away from (contract §15). */
  negativeIds?: readonly string[];
  strategy?: 'centroid' | 'best_score';
}

export interface LensRequest extends SimilarityParams {
  /** A base64 data URI of a jpeg or png image. */
  image: string;
}

/** A similarity result before a transport shapes it; `path` is what its explore_url carries. */
export interface SimilarityHit {
  item: StoredItem;
  /** Absent for explore's random start, which has nothing to be similar to. */
  score?: number;
  /** With group: the entry's group and its further items (up to group size − 1). */
  group?: { value: Scalar | null; count: number; more: SimilarityHit[] };
}

export interface SimilarityResult {
  hits: SimilarityHit[];
  limit: number;
  /** The journey for explore_url (explore only). */
  path?: string[];
  /** With group: items shown per group. */
  groupSize?: number;
  page: number;
  /** With exhaustive: how many items were ranked (contract §15). */
  total?: number;
}

const DATA_URI = /^data:image\/(png|jpeg|jpg);base64,([A-Za-z0-9+/=\s]+)$/;
/** How many neighbours explore considers before diversifying the page. */
const EXPLORE_POOL = 4;

/** Scores as clients see them, on both APIs: 0–1, six decimals. */
const tidyScore = (score: number) => Math.min(1, Math.max(0, Math.round(score * 1e6) / 1e6));
const tidy = (hits: Array<{ item: StoredItem; score: number }>): SimilarityHit[] =>
  hits.map((h) => ({ item: h.item, score: tidyScore(h.score) }));

/** Grouped hits as entries: each group's best, carrying the group and its further items. */
const tidyGroups = (groups: ScoredGroup[]): SimilarityHit[] =>
  groups.map((g) => ({
    ...tidy(g.hits.slice(0, 1))[0]!,
    group: { value: g.value, count: g.count, more: tidy(g.hits.slice(1)) },
  }));

function limitOf(p: SimilarityParams): number {
  const limit = p.limit ?? LIMITS.pageSizeDefault;
  if (!Number.isInteger(limit) || limit < LIMITS.pageSizeMin || limit > LIMITS.pageSizeMax)
    throw invalid(`limit: must be an integer from ${LIMITS.pageSizeMin} to ${LIMITS.pageSizeMax}`, [
      { param: 'limit', message: `${LIMITS.pageSizeMin} to ${LIMITS.pageSizeMax}` },
    ]);
  return limit;
}

/** similar, explore and lens (contract §7): billable, on processed items only. */
export class SimilarityService {
  constructor(
    private readonly vision: VisionService,
    private readonly analyzer: ImageAnalyzer,
    private readonly embedderId: string,
    private readonly tuned: Pick<TunedModels, 'of'>,
  ) {}

  /** Validation comes before readiness: a request missing its id is a 400 on any dataset. */
  private requireId(id: string | undefined, param = 'id'): asserts id is string {
    if (id === undefined || id === '')
      throw invalid(`${param} is required`, [{ param, message: 'the id of a dataset item' }]);
  }

  /** A processed item the scope holds, with its vector; anything else is the one 404. */
  private async target(scope: VisionScope, id: string | undefined, param = 'id') {
    this.requireId(id, param);
    const found = await scope.embedded(id);
    if (!found) throw new AppError('not_found', `item '${id}' not found (or not processed yet)`);
    const { item, embedding: e } = found;
    if (e.embedder !== this.embedderId)
      throw new AppError(
        'unavailable',
        `item '${id}' is being re-processed for the embedder ${this.embedderId} (the service's embedder changed); GraphQL Dataset.embedder.reprocessing shows what is left`,
        undefined,
        30,
      );
    if (!e.vector)
      throw new AppError(
        'not_found',
        `item '${id}' has no visual embedding: its image could not be downloaded again when the embedder changed; push it with a changed url (a new query string will do) to retry`,
      );
    return { item, vector: e.vector };
  }

  /**
   * The checked §15 controls and the ranking scope of one request, tuned when the dataset's
   * tuning is active (contract §20).
   */
  private async ranking(
    scope: VisionScope,
    d: Discovery,
    limit: number,
    r: Omit<RankingScope, 'embedder' | 'tuning'>,
  ): Promise<Ranking> {
    const tuning = await this.tuned.of(scope.ds);
    return new Ranking(
      scope,
      { ...r, embedder: this.embedderId, ...(tuning ? { tuning } : {}) },
      d,
      limit,
    );
  }

  /**
   * The target first (score 1, page 1 only), then the most similar items matching q, in pages
   * of `limit` entries cut from one ranking (contract §15).
   */
  async similar(
    who: Principal,
    org: string,
    name: string,
    p: SimilarRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'similar', async (scope, bill) => {
      const limit = limitOf(p);
      const d = checkDiscovery(p, limit);
      const vars = scope.vars(p.v);
      const catalogue = await scope.catalogue();
      const where = await scope.where(p.q, undefined, catalogue);
      const group = this.vision.group(p.group, catalogue);
      this.requireId(p.id);
      await scope.ready();
      const { item, vector } = await this.target(scope, p.id);
      const parent = item.metadata.parent;
      const extra: Condition[] =
        p.excludeParent && parent !== undefined && !Array.isArray(parent)
          ? [{ kind: 'exclude', field: 'parent', values: [String(parent)] }]
          : [];
      const ranking = await this.ranking(scope, d, limit, {
        vectors: [vector],
        where,
        extra,
        excludeIds: [item.id],
      });
      const first = d.page === 1;
      if (group) {
        const own = groupValue(item, group.field);
        const [head, rest, total] = await bill(
          vars,
          () =>
            Promise.all([
              first ? this.ownGroup(ranking, scope, where, item, own, group) : undefined,
              ranking.groups(group, 1, groupKey(own)),
              ranking.total(),
            ]),
          ([, r]) =>
            shownFacts(
              where,
              r.map((g) => g.hits[0]!.item),
            ),
        );
        const hits = tidyGroups(rest);
        return {
          hits: head ? [{ item, score: 1, group: head }, ...hits] : hits,
          limit,
          groupSize: group.size,
          page: d.page,
          ...(total !== undefined ? { total } : {}),
        };
      }
      const [hits, total] = await bill(
        vars,
        () => Promise.all([ranking.page(1), ranking.total()]),
        // the report counts the client's filters, not the service's own (exclude_parent)
        ([r]) =>
          shownFacts(
            where,
            r.map((h) => h.item),
          ),
      );
      return {
        hits: first ? [{ item, score: 1 }, ...tidy(hits)] : tidy(hits),
        limit,
        page: d.page,
        ...(total !== undefined ? { total } : {}),
      };
    });
  }

  /** similar's target with its own group: its count and its nearest group mates. */
  private async ownGroup(
    ranking: Ranking,
    scope: VisionScope,
    where: Where,
    item: StoredItem,
    own: Scalar | undefined,
    group: GroupSpec,
  ): Promise<NonNullable<SimilarityHit['group']>> {
    if (own === undefined) return { value: null, count: 1, more: [] };
    const [[count], more] = await Promise.all([
      scope.groupCounts(where, group.field, [own]),
      withinGroup(ranking.nearest(), group.field, own, group.size - 1, [item.id]),
    ]);
    return { value: own, count: count!, more: tidy(more) };
  }

  /**
   * Without id: a random selection matching q. With id: the next step of a journey — items
   * near the selection (steered by the earlier selections in `path`), diversified (by the
   * journey's own rule unless `diversity` is given), never repeating a selection.
   */
  async explore(
    who: Principal,
    org: string,
    name: string,
    p: ExploreRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'explore', async (scope, bill) => {
      const limit = limitOf(p);
      // explore has no pages: each step follows a selection
      const asked = checkDiscovery({ ...p, page: undefined }, limit);
      const vars = scope.vars(p.v);
      const earlierIds = checkJourney(p.path ?? []);
      const catalogue = await scope.catalogue();
      const where = await scope.where(p.q, undefined, catalogue);
      const group = this.vision.group(p.group, catalogue);
      const random = p.id === undefined || p.id === '';
      if (group && random)
        throw invalid('group on explore needs id: a random start has no groups to rank', [
          { param: 'group', message: 'only with id' },
        ]);
      if (random && (asked.diversity !== undefined || asked.exhaustive))
        throw invalid('diversity and exhaustive on explore need id: a random start ranks nothing', [
          { param: asked.exhaustive ? 'exhaustive' : 'diversity', message: 'only with id' },
        ]);
      await scope.ready();
      if (random) {
        const seed = crypto.randomInt(0, 2 ** 31);
        const items = await bill(
          vars,
          () => scope.sample(where, limit, seed),
          (r) => shownFacts(where, r),
        );
        return { hits: items.map((item) => ({ item })), limit, path: [], page: 1 };
      }
      const { item, vector } = await this.target(scope, p.id!);
      // path ids outside the scope are dropped, as unknown ones are
      const earlier = (await scope.embeddings(earlierIds))
        .filter((e) => e?.embedder === this.embedderId && e.vector)
        .map((e) => e!.vector!);
      // Without `diversity` the journey keeps its own rule: a pool of 4 × limit (at most 200),
      // relevance weighed 0.7, pictures identical to the selection or a pick used last.
      const own = asked.diversity === undefined;
      const d: Discovery = own
        ? { ...asked, diversity: 0, candidates: Math.min(limit * EXPLORE_POOL, 200) }
        : asked;
      const ranking = await this.ranking(scope, d, limit, {
        vectors: [steer(vector, earlier)],
        where,
        extra: [],
        excludeIds: [item.id, ...earlierIds],
      });
      const path = [...earlierIds, item.id];
      if (group) {
        const excludeKey = groupKey(groupValue(item, group.field));
        const [groups, total] = await bill(
          vars,
          async () =>
            Promise.all([
              own
                ? ranking
                    .groupPool(group, d.candidates, excludeKey)
                    .then((pool) => journeyOrder(pool, (g) => g.hits[0]!, limit, vector))
                    .then((g) => ranking.floorGroups(g))
                : ranking.groups(group, 0, excludeKey),
              ranking.total(),
            ]),
          ([r]) =>
            shownFacts(
              where,
              r.map((g) => g.hits[0]!.item),
            ),
        );
        return {
          hits: tidyGroups(groups),
          limit,
          path,
          groupSize: group.size,
          page: 1,
          ...(total !== undefined ? { total } : {}),
        };
      }
      const [hits, total] = await bill(
        vars,
        () =>
          Promise.all([
            own
              ? ranking
                  .pool(true)
                  .then((pool) => ranking.floor(journeyOrder(pool, (h) => h, limit, vector)))
              : ranking.page(),
            ranking.total(),
          ]),
        ([r]) =>
          shownFacts(
            where,
            r.map((h) => h.item),
          ),
      );
      return { hits: tidy(hits), limit, path, page: 1, ...(total !== undefined ? { total } : {}) };
    });
  }

  /** Items similar to an uploaded image (a data URI, jpeg or png). */
  async lens(who: Principal, org: string, name: string, p: LensRequest): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'lens', async (scope, bill) => {
      const limit = limitOf(p);
      const d = checkDiscovery(p, limit);
      const vars = scope.vars(p.v);
      const { image } = p;
      // REST refuses a larger body before parsing; GraphQL bodies may be larger, so check here too.
      if (image.length > LIMITS.lensBodyBytes)
        throw new AppError(
          'payload_too_large',
          `image is ${image.length} characters; an image search takes at most 500 KB`,
        );
      const m = DATA_URI.exec(image);
      if (!m)
        throw invalid('image must be a base64 data URI of a jpeg or png image', [
          {
            field: 'image',
            message: 'expected data:image/png;base64,… or data:image/jpeg;base64,…',
          },
        ]);
      const catalogue = await scope.catalogue();
      const where = await scope.where(p.q, undefined, catalogue);
      const group = this.vision.group(p.group, catalogue);
      await scope.ready();
      let vectors: number[][];
      try {
        vectors = await this.analyzer.queryVectors(Buffer.from(m[2]!, 'base64'));
      } catch (e) {
        if (!(e instanceof ImageError)) throw e;
        const reason = e.message;
        throw invalid(`image cannot be used: ${reason}`, [{ field: 'image', message: reason }]);
      }
      const ranking = await this.ranking(scope, d, limit, {
        vectors,
        where,
        extra: [],
        excludeIds: [],
      });
      return this.ranked(bill, vars, ranking, where, limit, d, group);
    });
  }

  /**
   * Items in the style of a curated group (contract §11, §15): ranked against the group as a
   * whole (centroid: the mean of its members' unit vectors, pushed away from the negatives') or
   * each item by its best positive (best_score); inputs never returned.
   */
  async collection(
    who: Principal,
    org: string,
    name: string,
    p: CollectionRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'collection', async (scope, bill) => {
      const limit = limitOf(p);
      const d = checkDiscovery(p, limit);
      const vars = scope.vars(p.v);
      const ids = idSet(p.ids);
      if (ids.length < 1 || ids.length > LIMITS.collectionMaxIds)
        throw invalid(`ids: between 1 and ${LIMITS.collectionMaxIds} item ids; got ${ids.length}`, [
          { param: 'ids', message: `1 to ${LIMITS.collectionMaxIds} comma-separated item ids` },
        ]);
      const negativeIds = idSet(p.negativeIds ?? []);
      if (negativeIds.length > LIMITS.collectionMaxNegativeIds)
        throw invalid(
          `negative_ids: at most ${LIMITS.collectionMaxNegativeIds} item ids; got ${negativeIds.length}`,
          [{ param: 'negative_ids', message: `0 to ${LIMITS.collectionMaxNegativeIds} item ids` }],
        );
      const both = negativeIds.filter((id) => ids.includes(id));
      if (both.length)
        throw invalid(`negative_ids: ${both.slice(0, 10).join(', ')} also in ids`, [
          { param: 'negative_ids', message: 'an item is either a positive or a negative' },
        ]);
      const strategy = p.strategy ?? 'centroid';
      if (strategy !== 'centroid' && strategy !== 'best_score')
        throw invalid("strategy must be 'centroid' or 'best_score'", [
          { param: 'strategy', message: "expected 'centroid' or 'best_score'" },
        ]);
      const catalogue = await scope.catalogue();
      const where = await scope.where(p.q, undefined, catalogue);
      const group = this.vision.group(p.group, catalogue);
      if (group && strategy === 'best_score' && negativeIds.length)
        throw invalid('strategy=best_score with negative_ids cannot be grouped', [
          { param: 'group', message: 'not with best_score and negative_ids' },
        ]);
      await scope.ready();
      const [positives, negatives] = await Promise.all([
        this.members(scope, ids, 'ids'),
        this.members(scope, negativeIds, 'negative_ids'),
      ]);
      const steered = strategy === 'best_score';
      const ranking = await this.ranking(scope, d, limit, {
        vectors: steered ? positives : [centroidQuery(positives, negatives)],
        where,
        extra: [],
        excludeIds: [...ids, ...negativeIds],
        ...(steered && negatives.length ? { negatives } : {}),
      });
      return this.ranked(bill, vars, ranking, where, limit, d, group);
    });
  }

  /** The vectors of a collection's items; 404 naming those that are not processed items. */
  private async members(scope: VisionScope, ids: string[], param: string): Promise<number[][]> {
    const found = await Promise.all(
      ids.map((id) =>
        this.target(scope, id).then(
          (t) => t.vector,
          (e: unknown) => {
            if (e instanceof AppError && e.code === 'not_found') return id;
            throw e;
          },
        ),
      ),
    );
    const unknown = found.filter((m): m is string => typeof m === 'string');
    if (unknown.length)
      throw new AppError(
        'not_found',
        `${unknown.length} of the ${param} are not processed items of this dataset: ${unknown.slice(0, 10).join(', ')}`,
        unknown.slice(0, 50).map((id) => ({ param, id, message: 'not found' })),
      );
    return found as number[][];
  }

  /** One billed ranked page (lens, collection), grouped when asked. */
  private async ranked(
    bill: Bill,
    vars: Record<string, string>,
    ranking: Ranking,
    where: Where,
    limit: number,
    d: Discovery,
    group: GroupSpec | undefined,
  ): Promise<SimilarityResult> {
    const common = { limit, page: d.page };
    if (group) {
      const [groups, total] = await bill(
        vars,
        () => Promise.all([ranking.groups(group), ranking.total()]),
        ([r]) =>
          shownFacts(
            where,
            r.map((g) => g.hits[0]!.item),
          ),
      );
      return {
        ...common,
        hits: tidyGroups(groups),
        groupSize: group.size,
        ...(total !== undefined ? { total } : {}),
      };
    }
    const [hits, total] = await bill(
      vars,
      () => Promise.all([ranking.page(), ranking.total()]),
      ([r]) =>
        shownFacts(
          where,
          r.map((h) => h.item),
        ),
    );
    return { ...common, hits: tidy(hits), ...(total !== undefined ? { total } : {}) };
  }
}

/** Explore's own diversification of a pool (when `diversity` is not given). */
function journeyOrder<T>(
  pool: T[],
  head: (t: T) => { score: number; vector?: number[] },
  limit: number,
  selected: number[],
): T[] {
  const heads = pool.flatMap((t) => {
    const h = head(t);
    return h.vector ? [{ score: h.score, vector: h.vector, t }] : [];
  });
  return diversify(heads, limit, 0.7, [selected]).map((h) => h.t);
}

/** Ids as a request lists them: trimmed, blanks and repeats dropped. */
const idSet = (ids: readonly string[]): string[] => [
  ...new Set(ids.map((s) => s.trim()).filter(Boolean)),
];

/** What the analytics report keeps of a similarity request: its filters and the ids it showed. */
function shownFacts(where: Where, shown: StoredItem[]): RequestFacts {
  return { total: shown.length, filters: filterTerms(where.client), shown: shown.map((i) => i.id) };
}
