import crypto from 'node:crypto';
import { parseActionVars } from '../domain/action-vars';
import { AppError, invalid } from '../domain/errors';
import type { Dataset } from '../domain/dataset';
import type { StoredItem } from '../domain/item';
import { filterTerms, type RequestFacts } from '../domain/report';
import { groupKey, groupValue, type GroupSpec } from '../domain/group';
import { checkJourney, diversify, steer } from '../domain/journey';
import { LIMITS } from '../domain/limits';
import type { Scalar } from '../domain/metadata';
import { ImageError } from '../domain/processing';
import type { ItemReader } from '../ports/item-reader';
import type { ImageAnalyzer } from '../ports/image-analyzer';
import type { ScoredItem, SearchEngine } from '../ports/search-engine';
import type { Condition } from '../query/ast';
import type { Principal } from './principal';
import { nearestGroups, withinGroup, type Nearest, type ScoredGroup } from './similar-groups';
import type { Bill, VisionService } from './vision';

/** What every similarity request takes besides its target (contract §7). */
interface SimilarityParams {
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
    private readonly store: ItemReader,
    private readonly engine: SearchEngine,
    private readonly vision: VisionService,
    private readonly analyzer: ImageAnalyzer,
    private readonly embedderId: string,
  ) {}

  /** Validation comes before readiness: a request missing its id is a 400 on any dataset. */
  private requireId(id: string | undefined, param = 'id'): asserts id is string {
    if (id === undefined || id === '')
      throw invalid(`${param} is required`, [{ param, message: 'the id of a dataset item' }]);
  }

  private async target(datasetId: string, id: string | undefined, param = 'id') {
    this.requireId(id, param);
    const e = await this.store.getEmbedding(datasetId, id);
    const [item] = e ? await this.store.getItems(datasetId, [id]) : [];
    if (!e || !item || item.state !== 'processed')
      throw new AppError('not_found', `item '${id}' not found (or not processed yet)`);
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

  /** The target first (score 1), then the `limit − 1` most similar items matching q. */
  async similar(
    who: Principal,
    org: string,
    name: string,
    p: SimilarRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'similar', async (ds, bill) => {
      const limit = limitOf(p);
      const vars = parseActionVars(p.v);
      const catalogue = await this.store.catalogue(ds.id);
      const conditions = await this.vision.conditions(ds, p.q, catalogue);
      const group = this.vision.group(p.group, catalogue);
      this.requireId(p.id);
      await this.vision.requireReady(ds);
      const { item, vector } = await this.target(ds.id, p.id);
      if (group) {
        const hits = await this.similarGroups(bill, ds, vars, item, vector, conditions, {
          limit,
          group,
          excludeParent: p.excludeParent,
        });
        return { hits, limit, groupSize: group.size };
      }
      const parent = item.metadata.parent;
      const extra: Condition[] =
        p.excludeParent && parent !== undefined && !Array.isArray(parent)
          ? [{ kind: 'exclude', field: 'parent', values: [String(parent)] }]
          : [];
      const hits = await this.nearest(bill, ds, vars, [vector], conditions, {
        limit: limit - 1,
        excludeIds: [item.id],
        extra,
      });
      return { hits: [{ item, score: 1 }, ...hits], limit };
    });
  }

  /**
   * similar with group: the target first with its own group (its nearest group mates), then the
   * best items of other groups; exclude_parent still leaves out the target's parent.
   */
  private async similarGroups(
    bill: Bill,
    ds: Dataset,
    vars: Record<string, string>,
    item: StoredItem,
    vector: number[],
    conditions: Condition[],
    p: { limit: number; group: GroupSpec; excludeParent?: boolean },
  ): Promise<SimilarityHit[]> {
    const { field, size } = p.group;
    const own = groupValue(item, field);
    const parent = item.metadata.parent;
    const extra: Condition[] =
      p.excludeParent && parent !== undefined && !Array.isArray(parent)
        ? [{ kind: 'exclude', field: 'parent', values: [String(parent)] }]
        : [];
    const nearest = this.nearestFn(ds, [vector], [...conditions, ...extra]);
    const [first, rest] = await bill(
      vars,
      () =>
        Promise.all([
          own === undefined
            ? { value: null, count: 1, more: [] as SimilarityHit[] }
            : Promise.all([
                this.engine.groupCounts(ds.id, conditions, field, [own]),
                withinGroup(nearest, field, own, size - 1, [item.id]),
              ]).then(([[count], more]) => ({ value: own, count: count!, more: tidy(more) })),
          nearestGroups(this.engine, ds.id, nearest, conditions, {
            want: p.limit - 1,
            group: p.group,
            excludeIds: [item.id],
            excludeKey: groupKey(own),
          }),
        ]),
      ([, r]) =>
        shownFacts(
          conditions,
          r.map((g) => g.hits[0]!.item),
        ),
    );
    return [{ item, score: 1, group: first }, ...tidyGroups(rest)];
  }

  /** Nearest items to the vectors (each item at its best score over them) under `conditions`. */
  private nearestFn(
    ds: Dataset,
    vectors: number[][],
    conditions: Condition[],
    includeVectors = false,
  ): Nearest {
    const one = (vector: number[], limit: number, extra: Condition[], excludeIds: string[]) =>
      this.engine.similar(ds.id, {
        vector,
        embedder: this.embedderId,
        conditions: [...conditions, ...extra],
        limit,
        excludeIds,
        includeVectors,
      });
    return async (limit, extra, excludeIds) =>
      vectors.length === 1
        ? one(vectors[0]!, limit, extra, excludeIds)
        : bestOf(await Promise.all(vectors.map((v) => one(v, limit, extra, excludeIds))), limit);
  }

  /**
   * Without id: a random selection matching q. With id: the next step of a journey — items
   * near the selection (steered by the earlier selections in `path`), diversified by maximal
   * marginal relevance, never repeating a selection.
   */
  async explore(
    who: Principal,
    org: string,
    name: string,
    p: ExploreRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'explore', async (ds, bill) => {
      const limit = limitOf(p);
      const vars = parseActionVars(p.v);
      const earlierIds = checkJourney(p.path ?? []);
      const catalogue = await this.store.catalogue(ds.id);
      const conditions = await this.vision.conditions(ds, p.q, catalogue);
      const group = this.vision.group(p.group, catalogue);
      if (group && (p.id === undefined || p.id === ''))
        throw invalid('group on explore needs id: a random start has no groups to rank', [
          { param: 'group', message: 'only with id' },
        ]);
      await this.vision.requireReady(ds);
      if (p.id === undefined || p.id === '') {
        const seed = crypto.randomInt(0, 2 ** 31);
        const items = await bill(
          vars,
          () => this.engine.sample(ds.id, conditions, limit, seed),
          (r) => shownFacts(conditions, r),
        );
        return { hits: items.map((item) => ({ item })), limit, path: [] };
      }
      const { item, vector } = await this.target(ds.id, p.id);
      const earlier = (
        await Promise.all(earlierIds.map((id) => this.store.getEmbedding(ds.id, id)))
      )
        .filter((e) => e?.embedder === this.embedderId && e.vector)
        .map((e) => e!.vector!);
      const query = steer(vector, earlier);
      if (group) {
        const nearest = this.nearestFn(ds, [query], conditions, true);
        const groups = await bill(
          vars,
          async () => {
            const pool = await nearestGroups(this.engine, ds.id, nearest, conditions, {
              want: Math.min(limit * EXPLORE_POOL, 200),
              group,
              excludeIds: [item.id, ...earlierIds],
              excludeKey: groupKey(groupValue(item, group.field)),
            });
            const heads = pool.flatMap((g) => {
              const v = g.hits[0]!.vector;
              return v ? [{ score: g.hits[0]!.score, vector: v, g }] : [];
            });
            return diversify(heads, limit, 0.7, [vector]).map((h) => h.g);
          },
          (r) =>
            shownFacts(
              conditions,
              r.map((g) => g.hits[0]!.item),
            ),
        );
        return {
          hits: tidyGroups(groups),
          limit,
          path: [...earlierIds, item.id],
          groupSize: group.size,
        };
      }
      const hits = await bill(
        vars,
        async () => {
          const pool = await this.engine.similar(ds.id, {
            vector: query,
            embedder: this.embedderId,
            conditions,
            limit: Math.min(limit * EXPLORE_POOL, 200),
            excludeIds: [item.id, ...earlierIds],
            includeVectors: true,
          });
          return diversify(
            pool.filter((h): h is typeof h & { vector: number[] } => !!h.vector),
            limit,
            0.7,
            [vector],
          );
        },
        (r) =>
          shownFacts(
            conditions,
            r.map((h) => h.item),
          ),
      );
      return {
        hits: tidy(hits),
        limit,
        path: [...earlierIds, item.id],
      };
    });
  }

  /** Items similar to an uploaded image (a data URI, jpeg or png). */
  async lens(who: Principal, org: string, name: string, p: LensRequest): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'lens', async (ds, bill) => {
      const limit = limitOf(p);
      const vars = parseActionVars(p.v);
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
      const catalogue = await this.store.catalogue(ds.id);
      const conditions = await this.vision.conditions(ds, p.q, catalogue);
      const group = this.vision.group(p.group, catalogue);
      await this.vision.requireReady(ds);
      let vectors: number[][];
      try {
        vectors = await this.analyzer.queryVectors(Buffer.from(m[2]!, 'base64'));
      } catch (e) {
        if (!(e instanceof ImageError)) throw e;
        const reason = e.message;
        throw invalid(`image cannot be used: ${reason}`, [{ field: 'image', message: reason }]);
      }
      const hits = await this.nearest(bill, ds, vars, vectors, conditions, {
        limit,
        excludeIds: [],
        group,
      });
      return { hits, limit, ...(group ? { groupSize: group.size } : {}) };
    });
  }

  /**
   * Items in the style of a curated group (contract §11): ranked against the group as a whole
   * (the mean of its members' unit vectors, normalised again), the group itself excluded.
   */
  async collection(
    who: Principal,
    org: string,
    name: string,
    p: CollectionRequest,
  ): Promise<SimilarityResult> {
    return this.vision.request(who, org, name, 'collection', async (ds, bill) => {
      const limit = limitOf(p);
      const vars = parseActionVars(p.v);
      const ids = [...new Set(p.ids.map((s) => s.trim()).filter(Boolean))];
      if (ids.length < 1 || ids.length > LIMITS.collectionMaxIds)
        throw invalid(`ids: between 1 and ${LIMITS.collectionMaxIds} item ids; got ${ids.length}`, [
          { param: 'ids', message: `1 to ${LIMITS.collectionMaxIds} comma-separated item ids` },
        ]);
      const catalogue = await this.store.catalogue(ds.id);
      const conditions = await this.vision.conditions(ds, p.q, catalogue);
      const group = this.vision.group(p.group, catalogue);
      await this.vision.requireReady(ds);
      const members = await Promise.all(
        ids.map((id) =>
          this.target(ds.id, id).then(
            (t) => t.vector,
            (e: unknown) => {
              if (e instanceof AppError && e.code === 'not_found') return id;
              throw e;
            },
          ),
        ),
      );
      const unknown = members.filter((m): m is string => typeof m === 'string');
      if (unknown.length)
        throw new AppError(
          'not_found',
          `${unknown.length} of the ids are not processed items of this dataset: ${unknown.slice(0, 10).join(', ')}`,
          unknown.slice(0, 50).map((id) => ({ param: 'ids', id, message: 'not found' })),
        );
      const vector = centroid(members as number[][]);
      const hits = await this.nearest(bill, ds, vars, [vector], conditions, {
        limit,
        excludeIds: ids,
        group,
      });
      return { hits, limit, ...(group ? { groupSize: group.size } : {}) };
    });
  }

  /**
   * One billed nearest-neighbour search with this service's embedder, scores as clients see
   * them: with several query vectors, each item scores its best over them. `extra` conditions
   * are the service's own, applied but not logged as filters.
   */
  private async nearest(
    bill: Bill,
    ds: Dataset,
    vars: Record<string, string>,
    vectors: number[][],
    conditions: Condition[],
    page: { limit: number; excludeIds: string[]; extra?: Condition[]; group?: GroupSpec },
  ): Promise<SimilarityHit[]> {
    const { limit, excludeIds, extra = [], group } = page;
    if (group) {
      const nearest = this.nearestFn(ds, vectors, [...conditions, ...extra]);
      const groups = await bill(
        vars,
        () =>
          nearestGroups(this.engine, ds.id, nearest, conditions, {
            want: limit,
            group,
            excludeIds,
          }),
        (r) =>
          shownFacts(
            conditions,
            r.map((g) => g.hits[0]!.item),
          ),
      );
      return tidyGroups(groups);
    }
    const one = (vector: number[]) =>
      this.engine.similar(ds.id, {
        vector,
        embedder: this.embedderId,
        conditions: [...conditions, ...extra],
        limit,
        excludeIds,
      });
    const hits = await bill(
      vars,
      async () =>
        vectors.length === 1
          ? one(vectors[0]!)
          : bestOf(await Promise.all(vectors.map(one)), limit),
      // the report counts the client's filters, not the service's own (exclude_parent)
      (r) =>
        shownFacts(
          conditions,
          r.map((h) => h.item),
        ),
    );
    return tidy(hits);
  }
}

/** What the analytics report keeps of a similarity request: its filters and the ids it showed. */
function shownFacts(conditions: Condition[], shown: StoredItem[]): RequestFacts {
  return { total: shown.length, filters: filterTerms(conditions), shown: shown.map((i) => i.id) };
}

/** The direction the group points to: the normalised mean of its unit vectors. */
function centroid(vectors: number[][]): number[] {
  const sum = new Array<number>(vectors[0]!.length).fill(0);
  for (const v of vectors) {
    const n = Math.hypot(...v) || 1;
    v.forEach((x, i) => (sum[i]! += x / n));
  }
  const n = Math.hypot(...sum) || 1;
  return sum.map((x) => x / n);
}

/**
 * The `limit` best items over several searches, each item at its best score (first seen wins a
 * tie). Each list is that vector's own top `limit`, which holds every item of the fused top
 * `limit` that scores best with that vector, so the union holds the whole fused top.
 */
export function bestOf(lists: ScoredItem[][], limit: number): ScoredItem[] {
  const best = new Map<string, ScoredItem>();
  for (const list of lists)
    for (const h of list) {
      const seen = best.get(h.item.id);
      if (!seen || h.score > seen.score) best.set(h.item.id, h);
    }
  return [...best.values()].sort((a, b) => b.score - a.score).slice(0, limit);
}
