/**
 * Near-duplicate report (contract §18): what both engines share.
 */
import { COPY_MATCH } from './copy-signature';
import { compareText } from './text-order';

/**
 * Items in order of their pixel hash, then id → the runs of one hash as groups of ids (each in
 * the rows' order); a run of one item is no group.
 */
export function groupRuns(rows: ReadonlyArray<{ id: string; hash: string }>): string[][] {
  const groups: string[][] = [];
  let run: string[] = [];
  let hash: string | undefined;
  for (const r of rows) {
    if (r.hash !== hash) {
      if (run.length > 1) groups.push(run);
      run = [];
      hash = r.hash;
    }
    run.push(r.id);
  }
  if (run.length > 1) groups.push(run);
  return groups;
}

export type DuplicateKind = 'exact' | 'near';

interface Picture {
  pixelHash?: string;
  copySignature?: string;
}

/** A picture's pixel hash and copy signature, the absent ones left out. */
export const pictureKeys = (image: Picture | null | undefined): Picture => ({
  ...(image?.pixelHash ? { pixelHash: image.pixelHash } : {}),
  ...(image?.copySignature ? { copySignature: image.copySignature } : {}),
});

/** Two items of the same decoded pixels: their exact group reports them, not a near pair. */
export const samePixels = (a: Picture, b: Picture): boolean =>
  !!a.pixelHash && a.pixelHash === b.pixelHash;

/** The largest `max_distance` (contract §18): the neighbours kept are those within it. */
export const MAX_DISTANCE = 0.2;
/** Neighbours kept per item: a photo copied more often than this joins through its copies. */
export const NEIGHBOURS_KEPT = 32;

/**
 * The default `max_distance` per embedder, for pairs whose pictures' layouts match (COPY_MATCH):
 * crops, recompressions and resizes of one photo within it, different products of one category
 * outside (docs/api-notes.md: how it was chosen). Pairs of items processed before signatures
 * were kept count only within the smaller distance the embedding alone can vouch for.
 */
const DEFAULT_MAX_DISTANCE: Record<string, { verified: number; alone: number }> = {
  'hybrid-c22.5l15o0q7.5e55-v1': { verified: 0.16, alone: 0.08 },
  // the previous default's, for installations still re-embedding from it
  'hybrid-d52.5e47.5-v1': { verified: 0.14, alone: 0.08 },
  'efficientnet-lite0-v1': { verified: 0.2, alone: 0.13 },
  // colour and layout alone: a crop moves further than another photo of the same food
  'descriptor-v1': { verified: 0.03, alone: 0.01 },
};
/** A model of the operator's own (EMBEDDER=onnx): the first hybrid's, having nothing better. */
const FALLBACK = { verified: 0.14, alone: 0.08 };

/**
 * The limits of an embedder's own model; the 8-bit model's vectors lie within about 0.01 of
 * the float model's (cosine), so it takes the float model's limits, not measured on their own.
 */
function limitsOf(embedder: string | undefined) {
  const model = embedder?.replace('-int8-', '-');
  return (model && DEFAULT_MAX_DISTANCE[model]) || FALLBACK;
}

export function defaultMaxDistance(embedder: string | undefined): number {
  return limitsOf(embedder).verified;
}

/**
 * Whether a stored neighbour pair is a near copy at `maxDistance`: within it, and either its
 * pictures' layouts match or, without signatures to compare, it is within the share of the
 * distance the embedding alone can vouch for.
 */
export function nearCopy(
  pair: { distance: number; match?: number },
  maxDistance: number,
  embedder: string | undefined,
): boolean {
  if (pair.distance > maxDistance) return false;
  if (pair.match !== undefined) return pair.match >= COPY_MATCH;
  const d = limitsOf(embedder);
  return pair.distance <= (maxDistance * d.alone) / d.verified;
}

/** Two items within `distance` (cosine, 0–1) of each other, as the neighbour search found. */
export interface NearPair {
  a: string;
  b: string;
  distance: number;
}

export interface DuplicateGroup {
  id: string;
  kind: DuplicateKind;
  /** The first item (smallest id) first at distance 0, then by distance to it, then id. */
  items: Array<{ id: string; distance: number }>;
}

export interface GroupingInput {
  /** Groups of items with equal pixel hashes (groupRuns). */
  exact: readonly string[][];
  /** Pairs already within the report's max_distance. */
  near: readonly NearPair[];
  /** Which kinds: both by default (exact first, an item in at most one group). */
  kind?: DuplicateKind;
  /** Pairs never to be in one group: dismissed, or sharing a parent (exclude_same_parent). */
  apart(a: string, b: string): boolean;
  /**
   * Whether `apart` can hold for this item with any other (it is in a dismissal, or has a
   * parent when those are kept apart); every item when absent. Only such members are compared,
   * so a placeholder picture shared by thousands of items groups in linear time.
   */
  constrained?(id: string): boolean;
  /** The distance between two items of a near group (to its first item). */
  distance(a: string, b: string): number;
}

/**
 * The report's groups (contract §18), largest first, then by first item id. Items join by the
 * closest pairs first (single linkage, like joining transitively), except that two items kept
 * apart never end in one group: a join that would bring such a pair together is skipped, so a
 * dismissal holds even when a third item is close to both.
 */
export function duplicateGroups(input: GroupingInput): DuplicateGroup[] {
  const groups: DuplicateGroup[] = [];
  const taken = new Set<string>();
  const constrained = input.constrained ?? (() => true);
  if (input.kind !== 'near')
    for (const ids of input.exact)
      for (const members of exactCluster(ids, input.apart, constrained)) {
        members.forEach((m) => taken.add(m));
        groups.push(group('exact', members, () => 0));
      }
  if (input.kind !== 'exact') {
    const pairs =
      input.kind === 'near' ? [...input.exact.flatMap(exactPairs), ...input.near] : input.near;
    const free = pairs.filter((p) => !taken.has(p.a) && !taken.has(p.b));
    const ids = [...new Set(free.flatMap((p) => [p.a, p.b]))];
    for (const members of cluster(ids, free, input.apart, constrained))
      groups.push(group('near', members, input.distance));
  }
  return groups.sort(
    (x, y) => y.items.length - x.items.length || compareIds(x.items[0]!.id, y.items[0]!.id),
  );
}

/**
 * An exact group's joins at distance 0 for kind=near: each copy with the first (every pair would
 * be quadratic in the copies of a placeholder picture shared by thousands of items).
 */
function exactPairs(ids: readonly string[]): NearPair[] {
  const [first, ...rest] = [...ids].sort(compareIds);
  return rest.map((b) => ({ a: first!, b, distance: 0 }));
}

/**
 * An exact group split where items are kept apart: in id order, each item joins the first
 * subgroup holding nothing kept apart from it, or starts one.
 */
function exactCluster(
  ids: readonly string[],
  apart: (a: string, b: string) => boolean,
  constrained: (id: string) => boolean,
): string[][] {
  const groups: Array<{ members: string[]; bound: string[] }> = [];
  for (const id of [...ids].sort(compareIds)) {
    const c = constrained(id);
    const g = groups.find((x) => !c || x.bound.every((y) => !apart(y, id)));
    if (g) {
      g.members.push(id);
      if (c) g.bound.push(id);
    } else groups.push({ members: [id], bound: c ? [id] : [] });
  }
  return groups.filter((g) => g.members.length > 1).map((g) => g.members);
}

/** Groups of two or more from closest-first joins that never put an `apart` pair together. */
function cluster(
  ids: readonly string[],
  pairs: readonly NearPair[],
  apart: (a: string, b: string) => boolean,
  constrained: (id: string) => boolean,
): string[][] {
  type Joined = { members: string[]; bound: string[] };
  const of = new Map<string, Joined>(
    ids.map((id) => [id, { members: [id], bound: constrained(id) ? [id] : [] }]),
  );
  const ordered = [...pairs].sort(
    (x, y) => x.distance - y.distance || compareIds(x.a, y.a) || compareIds(x.b, y.b),
  );
  for (const p of ordered) {
    let [ga, gb] = [of.get(p.a), of.get(p.b)];
    if (!ga || !gb || ga === gb) continue;
    if (ga.bound.some((x) => gb!.bound.some((y) => apart(x, y)))) continue;
    // the smaller set moves into the larger: joins cost n log n in all
    if (ga.members.length < gb.members.length) [ga, gb] = [gb, ga];
    for (const y of gb.members) {
      ga.members.push(y);
      of.set(y, ga);
    }
    ga.bound.push(...gb.bound);
  }
  return [...new Set(of.values())].filter((g) => g.members.length > 1).map((g) => g.members);
}

function group(
  kind: DuplicateKind,
  members: readonly string[],
  distance: (a: string, b: string) => number,
): DuplicateGroup {
  const [first, ...rest] = [...members].sort(compareIds);
  const items = [
    { id: first!, distance: 0 },
    ...rest
      .map((id) => ({ id, distance: round(distance(first!, id)) }))
      .sort((x, y) => x.distance - y.distance || compareIds(x.id, y.id)),
  ];
  return { id: groupId(kind, first!), kind, items };
}

/** A group is named by its kind and first item: the same group keeps its id across reports. */
const groupId = (kind: DuplicateKind, first: string): string =>
  `${kind}:${Buffer.from(first).toString('base64url')}`;

const round = (d: number): number => Math.round(Math.max(0, d) * 1e6) / 1e6;

/** Code point order, as both engines list item ids. */
const compareIds = compareText;

/** Where a page ended: the last group's size and first item id. */
export interface Position {
  size: number;
  first: string;
}

/** `next_cursor`: base64url JSON of the last group's position, opaque to clients. */
export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.size, p.first])).toString('base64url');
}

/** The position a cursor names; undefined when it is not one this service wrote. */
export function decodeCursor(cursor: string): Position | undefined {
  if (!/^[A-Za-z0-9_-]{1,2000}$/.test(cursor)) return undefined;
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.toString('base64url') !== cursor) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (
    !Array.isArray(v) ||
    v.length !== 2 ||
    !Number.isInteger(v[0]) ||
    (v[0] as number) < 2 ||
    typeof v[1] !== 'string' ||
    !v[1]
  )
    return undefined;
  return { size: v[0] as number, first: v[1] };
}

/** The page after `after` (from the start without one) and the cursor of the page after it. */
export function pageOf(
  groups: readonly DuplicateGroup[],
  limit: number,
  after?: Position,
): { groups: DuplicateGroup[]; next?: string } {
  const start = after
    ? groups.findIndex(
        (g) =>
          g.items.length < after.size ||
          (g.items.length === after.size && compareIds(g.items[0]!.id, after.first) > 0),
      )
    : 0;
  const page = start < 0 ? [] : groups.slice(start, start + limit);
  const last = page.at(-1);
  const more = start >= 0 && start + limit < groups.length;
  return {
    groups: page,
    ...(more && last
      ? { next: encodeCursor({ size: last.items.length, first: last.items[0]!.id }) }
      : {}),
  };
}
