import { literalForms, type Condition } from '../../query/ast';
import { type Bits, andInPlace, andNotInPlace, orInPlace, set } from './bitset';
import type { DatasetIndex, FieldIndex } from './memory-index';

/**
 * Contract §5 on the in-memory index: each condition becomes the set of processed items it
 * holds for, exactly as the SQL oracle (test/oracle/sql-query.ts) matches them (the property
 * test in test/unit/embedded-index-equivalence.test.ts compares the two on random data).
 */
export function matching(ix: DatasetIndex, conditions: Condition[]): Bits {
  return conjunction(ix, conditions);
}

const universe = (ix: DatasetIndex): Bits => ix.processed.slice(0, ix.words);

function conjunction(ix: DatasetIndex, conditions: Condition[]): Bits {
  const out = universe(ix);
  for (const c of conditions) andInPlace(out, lower(ix, c));
  return out;
}

/** Items holding any of `values` in the field: strings exactly, numbers and booleans as parsed. */
function holdingAny(ix: DatasetIndex, f: FieldIndex | undefined, values: string[]): Bits {
  const out = new Uint32Array(ix.words);
  if (!f) return out;
  const or = (id: number | undefined) => {
    if (id !== undefined) f.values[id]!.posting.orInto(out);
  };
  for (const v of values) {
    const forms = literalForms(v);
    or(f.strIds.get(forms.str));
    if (forms.num !== undefined) or(f.numIds.get(forms.num));
    if (forms.bool !== undefined) or(f.boolIds.get(String(forms.bool)));
  }
  return out;
}

/** First index in the sorted `nums` whose value is >= x (or > x when `strict`). */
function lowerBound(nums: Float64Array, x: number, strict: boolean): number {
  let lo = 0;
  let hi = nums.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (strict ? nums[mid]! <= x : nums[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function lower(ix: DatasetIndex, c: Condition): Bits {
  switch (c.kind) {
    case 'match':
      return andInPlace(holdingAny(ix, ix.field(c.field), c.values), ix.processed);
    case 'exclude':
      return andNotInPlace(universe(ix), holdingAny(ix, ix.field(c.field), c.values));
    case 'range': {
      const out = new Uint32Array(ix.words);
      const f = ix.field(c.field);
      if (!f) return out;
      const { nums, slots } = f.numericRows();
      const from = c.gte === undefined ? 0 : lowerBound(nums, c.gte, false);
      const to = c.lte === undefined ? nums.length : lowerBound(nums, c.lte, true);
      for (let i = from; i < to; i++) set(out, slots[i]!);
      return andInPlace(out, ix.processed);
    }
    case 'timeRange': {
      const times = c.field === 'service_created_at' ? ix.created : ix.updated;
      const out = universe(ix);
      const lo = c.gte ?? -Infinity;
      const hi = c.lte ?? Infinity;
      for (let w = 0; w < out.length; w++) {
        let word = out[w]!;
        while (word) {
          const t = word & -word;
          const slot = (w << 5) + (31 - Math.clz32(t));
          const v = times[slot]!;
          if (!(v >= lo && v <= hi)) out[w]! &= ~t;
          word ^= t;
        }
      }
      return out;
    }
    case 'text': {
      const out = universe(ix);
      for (const term of c.terms) {
        const p = ix.termPosting(term);
        if (!p) return new Uint32Array(ix.words);
        const has = new Uint32Array(ix.words);
        p.orInto(has);
        andInPlace(out, has);
      }
      return out;
    }
    case 'exists': {
      const out = new Uint32Array(ix.words);
      ix.field(c.field)?.holders.orInto(out);
      return andInPlace(out, ix.processed);
    }
    case 'any': {
      const out = new Uint32Array(ix.words);
      for (const conj of c.of) orInPlace(out, conjunction(ix, conj));
      return out;
    }
    case 'none':
      return andNotInPlace(universe(ix), conjunction(ix, c.of));
    case 'ids': {
      const slotOf = ix.cached(
        'slot-of-id',
        String(ix.slotVersion),
        () => new Map(ix.ids.flatMap((id, slot) => (id === undefined ? [] : [[id, slot]]))),
      );
      const out = new Uint32Array(ix.words);
      for (const id of c.ids) {
        const slot = slotOf.get(id);
        if (slot !== undefined) set(out, slot);
      }
      return andInPlace(out, ix.processed);
    }
  }
}
