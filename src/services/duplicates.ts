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
/** Items one dismissal names at most (a console group, or a client's selection). */
const MAX_DISMISSED = 100;
const MAX_LIMIT = 100;

/** The query's values checked against contract §18, each problem named. */
function checked(q: DuplicateQuery): { kind?: DuplicateKind; limit: number; after?: Position } {
  const details: ErrorDetail[] = [];
  if (q.kind !== undefined && q.kind !== '' && q.kind !== 'exact' && q.kind !== 'near')
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
    // who asks first: a token that may not read this report learns nothing of its parameters
    const ds = await this.auth.adminDataset(p, org, name);
    const { kind, limit, after } = checked(q);
    const embedder = ds.embedder?.id;
    const maxDistance = q.maxDistance ?? defaultMaxDistance(embedder);
    const [state, exact, entries, dismissals] = await Promise.all([
      this.store.state(ds.id),
      this.reader.sameImageGroups(ds.id),
      this.store.entries(ds.id),
      this.store.dismissals(ds.id),
    ]);
    // a stored pair counts while both items are as they were when it was found (either side's
    // entry may be the stale one: the current copy is kept)
    const candidates = entries.flatMap((e) =>
      e.neighbours
        .filter((n) => nearCopy(n, maxDistance, embedder))
        .map((n) => ({
          a: e.id,
          b: n.id,
          distance: n.distance,
          at: [e.processedAt, n.processedAt],
        })),
    );
    const ids = [...new Set(candidates.flatMap((x) => [x.a, x.b]).concat(exact.flat()))];
    const items = await this.items(ds.id, ids);
    const current = (id: string, at: number): boolean => {
      const it = items.get(id);
      return it?.state === 'processed' && (it.image?.processedAt ?? 0) === at;
    };
    const pairs = new Map<string, NearPair>();
    for (const x of candidates)
      if (current(x.a, x.at[0]!) && current(x.b, x.at[1]!))
        pairs.set(pairKey(x.a, x.b), { a: x.a, b: x.b, distance: x.distance });
    const near = [...pairs.values()];
    const distances = new Map(near.map((x) => [pairKey(x.a, x.b), x.distance]));
    for (const g of exact) for (const id of g.slice(1)) distances.set(pairKey(g[0]!, id), 0);
    // which dismissals hold each item, and each item's parent, looked up once
    const dismissedIn = new Map<string, number[]>();
    dismissals.forEach((d, i) =>
      d.forEach((id) => dismissedIn.set(id, [...(dismissedIn.get(id) ?? []), i])),
    );
    const parents = new Map<string, string>();
    if (q.excludeSameParent)
      for (const [id, it] of items) {
        const v = it.metadata.parent;
        if (v !== undefined && v !== null) parents.set(id, JSON.stringify(v));
      }
    const dismissedTogether = (a: string, b: string): boolean => {
      const [da, db] = [dismissedIn.get(a), dismissedIn.get(b)];
      return !!da && !!db && da.some((i) => db.includes(i));
    };
    const input = {
      exact,
      near,
      ...(kind ? { kind } : {}),
      apart: (a: string, b: string): boolean =>
        dismissedTogether(a, b) || (parents.has(a) && parents.get(a) === parents.get(b)),
      constrained: (id: string): boolean => dismissedIn.has(id) || parents.has(id),
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
        // a member whose vector cannot be read is reported at the largest distance asked
        distance: (a, b) => {
          const d = distances.get(pairKey(a, b)) ?? cosineDistance(vectors.get(a), vectors.get(b));
          return Number.isNaN(d) ? maxDistance : d;
        },
      });
    }
    const page = pageOf(groups, limit, after);
    // before the first pass, after an embedder change, or with items processed since the last
    const dirty =
      state.watermark === undefined || state.embedder !== embedder
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
    if (unique.length < 2 || unique.length > MAX_DISMISSED)
      throw invalid(`ids: name 2–${MAX_DISMISSED} different items`, [
        { param: 'ids', message: `2–${MAX_DISMISSED} different ids` },
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
