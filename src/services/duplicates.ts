import {
  MAX_DISTANCE,
  decodeCursor,
  defaultMaxDistance,
  nearCopy,
  duplicateGroups,
  pageOf,
  type DuplicateGroup,
  type DuplicateKind,
  type NearPair,
  type Position,
} from '../domain/duplicates';
import { invalid, type ErrorDetail } from '../domain/errors';
import type { StoredItem } from '../domain/item';
import type { DuplicateStore } from '../ports/duplicate-store';
import type { ItemReader } from '../ports/item-reader';
import type { AuthService } from './auth';
import type { Principal } from './principal';

export interface DuplicateQuery {
  /** exact or near; both when absent. */
  kind?: string;
  /** 0 < d ≤ 0.2; the embedder's default when absent. */
  maxDistance?: number;
  excludeSameParent: boolean;
  /** 1–100 groups; 20 when absent. */
  limit?: number;
  cursor?: string;
}

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

/** The query's values checked against contract §18, each problem named. */
function checked(q: DuplicateQuery): { kind?: DuplicateKind; limit: number; after?: Position } {
  const details: ErrorDetail[] = [];
  if (q.kind !== undefined && q.kind !== 'exact' && q.kind !== 'near')
    details.push({ param: 'kind', value: q.kind, message: 'expected exact or near' });
  if (q.maxDistance !== undefined && !(q.maxDistance > 0 && q.maxDistance <= MAX_DISTANCE))
    details.push({
      param: 'max_distance',
      value: String(q.maxDistance),
      message: `expected 0 < max_distance ≤ ${MAX_DISTANCE}`,
    });
  const limit = q.limit ?? DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
    details.push({ param: 'limit', value: String(q.limit), message: `expected 1–${MAX_LIMIT}` });
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  if (q.cursor !== undefined && !after)
    details.push({ param: 'cursor', message: 'not a cursor this report returned' });
  if (details.length)
    throw invalid(details.map((d) => `${d.param}: ${d.message}`).join('; '), details);
  return {
    ...(q.kind ? { kind: q.kind as DuplicateKind } : {}),
    limit,
    ...(after ? { after } : {}),
  };
}

export interface DuplicateReport {
  /** When the last pass finished (epoch ms); absent before the first. */
  computedAt?: number;
  /** Items processed since the last pass wait for the next (or none has run yet). */
  pending: boolean;
  groups: DuplicateGroup[];
  nextCursor?: string;
}

/** Ids per read of items by id. */
const READ_CHUNK = 1000;

const pairKey = (a: string, b: string): string => (a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`);

/**
 * The near-duplicate report of a dataset and its dismissals (contract §18): organisation
 * token, free. The report reads what the background pass stored, never searches itself.
 */
export class DuplicateService {
  constructor(
    private readonly auth: AuthService,
    private readonly reader: Pick<
      ItemReader,
      'sameImageGroups' | 'getItems' | 'processedSince' | 'getEmbedding' | 'existingIds'
    >,
    private readonly store: DuplicateStore,
  ) {}

  async report(
    p: Principal,
    org: string,
    name: string,
    q: DuplicateQuery,
  ): Promise<DuplicateReport> {
    const { kind, limit, after } = checked(q);
    const ds = await this.auth.adminDataset(p, org, name);
    const embedder = ds.embedder?.id;
    const maxDistance = q.maxDistance ?? defaultMaxDistance(embedder);
    const [state, exact, entries, dismissals] = await Promise.all([
      this.store.state(ds.id),
      this.reader.sameImageGroups(ds.id),
      this.store.entries(ds.id),
      this.store.dismissals(ds.id),
    ]);
    // a stored pair counts while both items are as they were when it was found
    const stamped = new Map<string, NearPair & { at: [number, number] }>();
    for (const e of entries)
      for (const n of e.neighbours)
        if (nearCopy(n, maxDistance, embedder)) {
          const key = pairKey(e.id, n.id);
          if (!stamped.has(key))
            stamped.set(key, {
              a: e.id,
              b: n.id,
              distance: n.distance,
              at: [e.processedAt, n.processedAt],
            });
        }
    const ids = [...new Set([...stamped.values()].flatMap((x) => [x.a, x.b]).concat(exact.flat()))];
    const items = await this.items(ds.id, ids);
    const current = (id: string, at: number): boolean => {
      const it = items.get(id);
      return it?.state === 'processed' && (it.image?.processedAt ?? 0) === at;
    };
    const near = [...stamped.values()].filter(
      (x) => current(x.a, x.at[0]) && current(x.b, x.at[1]),
    );
    const distances = new Map(near.map((x) => [pairKey(x.a, x.b), x.distance]));
    for (const g of exact) for (const id of g.slice(1)) distances.set(pairKey(g[0]!, id), 0);
    const apartSets = dismissals.map((d) => new Set(d));
    const dismissed = new Set(dismissals.flat());
    const parent = (id: string): string | undefined => {
      const v = items.get(id)?.metadata.parent;
      return v === undefined || v === null ? undefined : JSON.stringify(v);
    };
    const input = {
      exact,
      near,
      ...(kind ? { kind } : {}),
      apart: (a: string, b: string): boolean =>
        apartSets.some((s) => s.has(a) && s.has(b)) ||
        (q.excludeSameParent && parent(a) !== undefined && parent(a) === parent(b)),
      constrained: (id: string): boolean =>
        dismissed.has(id) || (q.excludeSameParent && parent(id) !== undefined),
      distance: (a: string, b: string): number => distances.get(pairKey(a, b)) ?? NaN,
    };
    let groups = duplicateGroups(input);
    // a member joined through others is compared with the first item from their vectors
    const missing = groups.flatMap((g) =>
      g.kind === 'near' && g.items.some((i) => Number.isNaN(i.distance))
        ? g.items.map((i) => i.id)
        : [],
    );
    if (missing.length) {
      const vectors = await this.vectors(ds.id, missing);
      groups = duplicateGroups({
        ...input,
        distance: (a, b) =>
          distances.get(pairKey(a, b)) ?? cosineDistance(vectors.get(a), vectors.get(b)),
      });
    }
    const page = pageOf(groups, limit, after);
    const dirty =
      state.watermark === undefined
        ? true
        : (await this.reader.processedSince(ds.id, state.watermark, undefined, 1)).length > 0;
    return {
      ...(state.computedAt !== undefined ? { computedAt: state.computedAt } : {}),
      pending: dirty,
      groups: page.groups,
      ...(page.next ? { nextCursor: page.next } : {}),
    };
  }

  /** Records that `ids` are not duplicates of each other; they must be the dataset's items. */
  async dismiss(p: Principal, org: string, name: string, ids: string[]): Promise<void> {
    const ds = await this.auth.adminDataset(p, org, name);
    const unique = [...new Set(ids)];
    if (unique.length < 2)
      throw invalid('ids: name at least two different items', [
        { param: 'ids', message: 'at least two different ids' },
      ]);
    const known = await this.reader.existingIds(ds.id, unique);
    const unknown = unique.filter((id) => !known.has(id));
    if (unknown.length)
      throw invalid(
        `ids: not items of dataset '${name}': ${unknown.slice(0, 5).join(', ')}`,
        unknown
          .slice(0, 20)
          .map((id) => ({ param: 'ids', id, message: 'not an item of this dataset' })),
      );
    await this.store.dismiss(ds.id, unique);
  }

  private async items(datasetId: string, ids: string[]): Promise<Map<string, StoredItem>> {
    const out = new Map<string, StoredItem>();
    for (let i = 0; i < ids.length; i += READ_CHUNK)
      for (const it of await this.reader.getItems(datasetId, ids.slice(i, i + READ_CHUNK)))
        out.set(it.id, it);
    return out;
  }

  private async vectors(datasetId: string, ids: string[]): Promise<Map<string, number[]>> {
    const out = new Map<string, number[]>();
    for (const id of new Set(ids)) {
      const e = await this.reader.getEmbedding(datasetId, id);
      if (e?.vector) out.set(id, e.vector);
    }
    return out;
  }
}

/** 1 − cosine of two unit vectors; NaN when one is missing (the caller's distances are rounded). */
function cosineDistance(a: number[] | undefined, b: number[] | undefined): number {
  if (!a || !b || a.length !== b.length) return NaN;
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return 1 - dot;
}
