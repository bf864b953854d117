import { isServiceTimeField } from '../../domain/limits';
import { compareText } from '../../domain/text-order';
import type { SearchRequest } from '../../ports/search-engine';
import { type Bits, has, slotsOf } from './bitset';
import type { DatasetIndex, FieldIndex } from './memory-index';

/** Sort keys: class 0 numbers, 1 strings, 2 lacking the field (as the SQL oracle's sortSql). */
interface Keys {
  cls: Uint8Array;
  num: Float64Array;
}

/** Every live slot's rank in id order (ties of every sort break by id, ascending). */
function idRanks(ix: DatasetIndex): Int32Array {
  return ix.cached('ids', String(ix.slotVersion), () => {
    const slots = slotsOf(ix.alive.subarray(0, ix.words));
    const byId = Array.from(slots).sort((a, b) => compareText(ix.ids[a]!, ix.ids[b]!));
    const rank = new Int32Array(ix.size);
    byId.forEach((s, i) => (rank[s] = i));
    return rank;
  });
}

/** Per slot, the class and the number to sort by (strings by their rank among the field's). */
function keysOf(ix: DatasetIndex, field: string): Keys {
  const cls = new Uint8Array(ix.size).fill(2);
  const num = new Float64Array(ix.size);
  if (isServiceTimeField(field)) {
    cls.fill(0);
    num.set((field === 'service_created_at' ? ix.created : ix.updated).subarray(0, ix.size));
    return { cls, num };
  }
  const f = ix.field(field);
  if (!f) return { cls, num };
  const strRank = stringRanks(f);
  for (let s = 0; s < ix.size; s++) {
    const v = ix.sortValue(s, f);
    if (!v) continue;
    cls[s] = v.vtype === 'n' ? 0 : 1;
    num[s] = v.vtype === 'n' ? v.num : strRank[f.strIds.get(v.text)!]!;
  }
  return { cls, num };
}

/** Each string value's rank among the field's strings, in code-point order. */
function stringRanks(f: FieldIndex): Int32Array {
  const ids = [...f.strIds.values()].sort((a, b) =>
    compareText(f.values[a]!.text, f.values[b]!.text),
  );
  const rank = new Int32Array(f.values.length);
  ids.forEach((id, i) => (rank[id] = i));
  return rank;
}

function comparator(keys: Keys, ids: Int32Array, desc: boolean) {
  const { cls, num } = keys;
  return (a: number, b: number): number => {
    const ca = cls[a]!;
    const d = ca - cls[b]!;
    if (d) return d;
    if (ca < 2) {
      const x = num[a]!;
      const y = num[b]!;
      if (x !== y) return (x < y ? -1 : 1) * (desc ? -1 : 1);
    }
    return ids[a]! - ids[b]!;
  };
}

/** The cache key of a sort's full order, and the version of the index it reflects. */
function orderKey(ix: DatasetIndex, sort: SearchRequest['sort']): [string, string] {
  const time = isServiceTimeField(sort.field);
  const f = time ? undefined : ix.field(sort.field);
  return [
    `order\u0000${sort.field}\u0000${sort.order}`,
    `${ix.slotVersion}:${time ? ix.version : (f?.version ?? -1)}:${f?.values.length ?? 0}`,
  ];
}

/**
 * Every live slot in the order of `sort`, built on first use and kept until a write changes
 * the field's values or the slots; a page then walks it and keeps the slots that match.
 */
function fullOrder(ix: DatasetIndex, sort: SearchRequest['sort']): Int32Array {
  const [key, version] = orderKey(ix, sort);
  return ix.cached(key, version, () => {
    const ids = idRanks(ix);
    const slots = slotsOf(ix.alive.subarray(0, ix.words));
    return slots.sort(comparator(keysOf(ix, sort.field), ids, sort.order === 'desc'));
  });
}

/** Below this many matches, sorting just them beats building (or walking) a full order. */
const SMALL = 4096;

/** The slots of the requested page among the matching ones, in the order of `sort`. */
export function pageOf(
  ix: DatasetIndex,
  matches: Bits,
  total: number,
  sort: SearchRequest['sort'],
  offset: number,
  limit: number,
): number[] {
  if (limit <= 0 || offset >= total) return [];
  const out: number[] = [];
  let skip = offset;
  for (const s of orderedMatches(ix, matches, total, sort)) {
    if (skip > 0) skip--;
    else if (out.push(s) >= limit) break;
  }
  return out;
}

/**
 * Every matching slot in the order of `sort`, lazily: a small match set is sorted on its own,
 * a large one read off the field's full order (built once, kept until a write changes it).
 */
export function* orderedMatches(
  ix: DatasetIndex,
  matches: Bits,
  total: number,
  sort: SearchRequest['sort'],
): Generator<number> {
  const [key, version] = orderKey(ix, sort);
  if (total <= SMALL && ix.caches.get(key)?.version !== version) {
    yield* sortedSmall(ix, Array.from(slotsOf(matches)), sort);
    return;
  }
  const order = fullOrder(ix, sort);
  let left = total;
  for (let i = 0; i < order.length && left > 0; i++) {
    const s = order[i]!;
    if (!has(matches, s)) continue;
    left--;
    yield s;
  }
}

/** A few slots sorted by `sort` directly (ties by id), as the full order would place them. */
export function sortedSmall(
  ix: DatasetIndex,
  slots: number[],
  sort: SearchRequest['sort'],
): number[] {
  const time = isServiceTimeField(sort.field);
  const f = time ? undefined : ix.field(sort.field);
  const cls = (s: number) => {
    if (time) return 0;
    const v = f && ix.sortValue(s, f);
    return v ? (v.vtype === 'n' ? 0 : 1) : 2;
  };
  const desc = sort.order === 'desc' ? -1 : 1;
  const keyed = slots.map((s) => {
    const c = cls(s);
    const v = c < 2 && !time ? ix.sortValue(s, f!)! : undefined;
    const key: number | string = time
      ? (sort.field === 'service_created_at' ? ix.created : ix.updated)[s]!
      : c === 0
        ? v!.num
        : c === 1
          ? v!.text
          : 0;
    return { s, c, key };
  });
  keyed.sort((a, b) => {
    if (a.c !== b.c) return a.c - b.c;
    if (a.c < 2 && a.key !== b.key) {
      const d =
        typeof a.key === 'number'
          ? (a.key as number) < (b.key as number)
            ? -1
            : 1
          : compareText(a.key as string, b.key as string);
      return d * desc;
    }
    return compareText(ix.ids[a.s]!, ix.ids[b.s]!);
  });
  return keyed.map((k) => k.s);
}
