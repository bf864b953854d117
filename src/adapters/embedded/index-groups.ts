import { groupKey, type GroupedPage } from '../../domain/group';
import type { Scalar } from '../../domain/metadata';
import type { GroupedSearchRequest } from '../../ports/search-engine';
import { type Bits, count, has, set, slotsOf } from './bitset';
import { orderedMatches, sortedSmall } from './index-sort';
import type { DatasetIndex, FieldIndex, FieldValue } from './memory-index';

/**
 * The groups of a field over the index (contract §13): per slot, the group of its scalar value
 * (-1 for none or an array: a group of its own); values of one key (groupKey: a string and a
 * boolean of the same text) share a group.
 */
export interface Groups {
  field: FieldIndex | undefined;
  /** Per slot: its group, or -1. */
  of: Int32Array;
  /** Per group: the field's value ids it gathers. */
  members: number[][];
}

export function groupsOf(ix: DatasetIndex, name: string): Groups {
  const f = ix.field(name);
  const version = `${ix.slotVersion}:${f?.version ?? -1}:${f?.values.length ?? 0}`;
  return ix.cached(`groups\u0000${name}`, version, () => {
    const of = new Int32Array(ix.size).fill(-1);
    const members: number[][] = [];
    if (!f) return { field: f, of, members };
    const byKey = new Map<string, number>();
    const groupOfValue = f.values.map((v) => {
      const key = groupKey(valueOf(v))!;
      let g = byKey.get(key);
      if (g === undefined) {
        g = members.length;
        byKey.set(key, g);
        members.push([]);
      }
      return g;
    });
    groupOfValue.forEach((g, id) => members[g]!.push(id));
    for (let s = 0; s < ix.size; s++) {
      const id = ix.scalarValueId(s, f);
      if (id >= 0) of[s] = groupOfValue[id]!;
    }
    return { field: f, of, members };
  });
}

const valueOf = (v: FieldValue): Scalar =>
  v.vtype === 'n' ? v.num : v.vtype === 'b' ? v.text === 'true' : v.text;

/** The matching slots of group `g`, its scalar holders only (a posting also holds array elements). */
function slotsOfGroup(gs: Groups, g: number, m: Bits): number[] {
  const out: number[] = [];
  for (const id of gs.members[g]!)
    gs.field!.values[id]!.posting.forEachIn(m, (s) => {
      if (gs.of[s] === g) out.push(s);
    });
  return out;
}

/** Matching groups, each counted once. */
function countGroups(gs: Groups, m: Bits): number {
  const seen = new Uint8Array(gs.members.length);
  let n = 0;
  for (const s of slotsOf(m)) {
    const g = gs.of[s]!;
    if (g < 0) n++;
    else if (!seen[g]) {
      seen[g] = 1;
      n++;
    }
  }
  return n;
}

/** A page of groups in the order of the sort (a group placed by its best item). */
export function groupPage(
  ix: DatasetIndex,
  m: Bits,
  req: GroupedSearchRequest,
): Omit<GroupedPage, 'groups'> & {
  groups: Array<{ value: Scalar | null; count: number; slots: number[] }>;
} {
  const total = count(m);
  const gs = groupsOf(ix, req.group.field);
  const want = req.offset + req.limit;
  const seen = new Uint8Array(gs.members.length);
  const firsts: number[] = [];
  if (req.limit > 0)
    for (const s of orderedMatches(ix, m, total, req.sort)) {
      const g = gs.of[s]!;
      if (g >= 0) {
        if (seen[g]) continue;
        seen[g] = 1;
      }
      if (firsts.push(s) >= want) break;
    }
  const groups = firsts.slice(req.offset).map((best) => {
    const g = gs.of[best]!;
    if (g < 0) return { value: null, count: 1, slots: [best] };
    const all = slotsOfGroup(gs, g, m);
    const slots = req.group.size === 1 ? [best] : firstOf(ix, all, req);
    const v = gs.field!.values[gs.members[g]![0]!]!;
    return { value: valueOf(v), count: all.length, slots };
  });
  return { groups, total, totalGroups: countGroups(gs, m), totalGroupsExact: true };
}

/** Per value, the matching items whose scalar value of the field has its key. */
export function groupCountsOf(
  ix: DatasetIndex,
  m: Bits,
  field: string,
  values: Scalar[],
): number[] {
  const gs = groupsOf(ix, field);
  const byKey = new Map<string, number>();
  gs.members.forEach((ids, g) => byKey.set(groupKey(valueOf(gs.field!.values[ids[0]!]!))!, g));
  return values.map((v) => {
    const g = byKey.get(groupKey(v) ?? '');
    return g === undefined ? 0 : slotsOfGroup(gs, g, m).length;
  });
}

/**
 * The first items of a group in the request's order. A group of a few items is sorted on its
 * own: walking the sort's full order for each group of a page would pass over every slot.
 */
function firstOf(ix: DatasetIndex, slots: number[], req: GroupedSearchRequest): number[] {
  if (slots.length <= FEW) return sortedSmall(ix, slots, req.sort).slice(0, req.group.size);
  const bits = new Uint32Array(ix.words);
  for (const s of slots) set(bits, s);
  const out: number[] = [];
  for (const s of orderedMatches(ix, bits, slots.length, req.sort))
    if (out.push(s) >= req.group.size) break;
  return out;
}

/** Up to this many items, a group is sorted on its own rather than read off the full order. */
const FEW = 1024;

/**
 * Facet counts of groups (contract §13): per value key of `f`, the matching groups with at least
 * one matching item holding it; `missing`, the groups with one lacking the field.
 */
export function groupFacetCounts(
  gs: Groups,
  f: FieldIndex | undefined,
  m: Bits,
): { counts: Array<{ v: FieldValue; n: number }>; missing: number } {
  const stamp = new Int32Array(gs.members.length).fill(-1);
  const counts: Array<{ v: FieldValue; n: number }> = [];
  if (f) {
    const byKey = new Map<string, FieldValue[]>();
    for (const v of f.values) {
      if (!v.posting.size) continue;
      const key = v.vtype === 'n' ? `n:${v.num}` : `t:${v.text}`;
      const list = byKey.get(key);
      if (list) list.push(v);
      else byKey.set(key, [v]);
    }
    let k = 0;
    for (const vs of byKey.values()) {
      let n = 0;
      for (const v of vs)
        v.posting.forEachIn(m, (s) => {
          const g = gs.of[s]!;
          if (g < 0) n++;
          else if (stamp[g] !== k) {
            stamp[g] = k;
            n++;
          }
        });
      if (n) counts.push({ v: vs[0]!, n });
      k++;
    }
  }
  const holders = new Uint32Array(m.length);
  f?.holders.orInto(holders);
  const seen = new Uint8Array(gs.members.length);
  let missing = 0;
  for (const s of slotsOf(m)) {
    if (has(holders, s)) continue;
    const g = gs.of[s]!;
    if (g < 0) missing++;
    else if (!seen[g]) {
      seen[g] = 1;
      missing++;
    }
  }
  return { counts, missing };
}
