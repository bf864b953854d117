import {
  calendarGrain,
  calendarKey,
  facetFigure,
  histogram,
  numberText,
  numericKey,
  onField,
  statsFigure,
  type FiguresSpec,
  type Figures,
  type HistogramSpec,
  type HistogramBucket,
  type ValueCount,
} from '../../domain/figures';
import type { Facets } from '../../ports/search-engine';
import type { Condition } from '../../query/ast';
import { type Bits, count, has } from './bitset';
import { matching } from './index-conditions';
import { groupFacetCounts, groupsOf } from './index-groups';
import { compareText } from '../../domain/text-order';
import type { DatasetIndex, FieldIndex, FieldValue } from './memory-index';
import { keyed } from '../../domain/keyed';

/** Each value of the field held by a matching item, with how many matching items hold it. */
function valueCounts(f: FieldIndex | undefined, m: Bits): Array<{ v: FieldValue; n: number }> {
  const out: Array<{ v: FieldValue; n: number }> = [];
  if (!f) return out;
  for (const v of f.values) {
    const n = v.posting.size ? v.posting.countIn(m) : 0;
    if (n) out.push({ v, n });
  }
  return out;
}

/**
 * Contract §10 on the in-memory index, figure for figure what the SQL oracle of the tests computes:
 * value counts come from each value's set of items counted against the matching set, and the
 * ordering, `other` and histogram buckets from domain/figures.ts, as on every engine.
 */
export function indexFigures(
  ix: DatasetIndex,
  conditions: Condition[],
  spec: FiguresSpec,
): Figures {
  const all = matching(ix, conditions);
  const out: Figures = {};
  if (spec.facets.length) {
    out.facets = keyed();
    for (const { field, disjunctive } of spec.facets) {
      const m = disjunctive
        ? matching(
            ix,
            conditions.filter((c) => !onField(c, field)),
          )
        : all;
      const f = ix.field(field);
      const grouped =
        spec.groupBy === undefined ? undefined : groupFacetCounts(groupsOf(ix, spec.groupBy), f, m);
      const values: ValueCount[] = (grouped?.counts ?? valueCounts(f, m)).map(({ v, n }) =>
        v.vtype === 'n'
          ? { num: v.num, text: numberText(v.num), count: n }
          : { text: v.text, count: n },
      );
      const missing = grouped ? grouped.missing : count(m) - (f ? f.holders.countIn(m) : 0);
      out.facets[field] = facetFigure(values, spec.facetSize, missing);
    }
  }
  if (spec.stats.length) {
    out.stats = keyed();
    for (const field of spec.stats) {
      const s = numericSummary(ix.field(field), all);
      out.stats[field] = statsFigure(s.n, s.lo ?? 0, s.hi ?? 0, s.total);
    }
  }
  if (spec.histograms.length) {
    out.histograms = keyed();
    for (const h of spec.histograms) out.histograms[h.field] = histogramOf(ix, h, all);
  }
  return out;
}

interface Summary {
  n: number;
  lo: number | null;
  hi: number | null;
  total: number;
}

/**
 * Count, min, max and sum of the numeric values of matching items, from the field's flat
 * numeric rows (each (item, value) once, as SQL's rows). The sum is compensated (Neumaier),
 * as SQLite's SUM is, so both agree but for rare roundings in the last bits. `each` sees
 * every counted value (histograms bucket them).
 */
function numericSummary(f: FieldIndex | undefined, m: Bits, each?: (num: number) => void): Summary {
  let n = 0;
  let lo: number | null = null;
  let hi: number | null = null;
  let sum = 0;
  let comp = 0;
  if (f) {
    const { nums, slots } = f.numericRows();
    for (let i = 0; i < nums.length; i++) {
      if (!has(m, slots[i]!)) continue;
      const x = nums[i]!;
      n++;
      // Rows are sorted by value: the first counted is the minimum, the last the maximum.
      if (lo === null) lo = x;
      hi = x;
      const t = sum + x;
      comp += Math.abs(sum) >= Math.abs(x) ? sum - t + x : x - t + sum;
      sum = t;
      each?.(x);
    }
  }
  return { n, lo, hi, total: sum + comp };
}

function histogramOf(ix: DatasetIndex, h: HistogramSpec, m: Bits): HistogramBucket[] {
  const counts = new Map<number, number>();
  const add = (key: number, n: number) => counts.set(key, (counts.get(key) ?? 0) + n);
  if ('calendar' in h) {
    const times = h.field === 'service_created_at' ? ix.created : ix.updated;
    const base = calendarGrain(h.calendar);
    let lo: number | null = null;
    let hi: number | null = null;
    // As SQL groups them: by whole hours or days (integer division), then into the calendar.
    let lastB = NaN;
    let lastKey = 0;
    for (let w = 0; w < m.length; w++) {
      let word = m[w]!;
      while (word) {
        const t = word & -word;
        const ms = times[(w << 5) + (31 - Math.clz32(t))]!;
        word ^= t;
        const b = Math.trunc(ms / base);
        if (b !== lastB) {
          lastB = b;
          lastKey = calendarKey(b * base, h.calendar);
        }
        add(lastKey, 1);
        lo = lo === null ? ms : Math.min(lo, ms);
        hi = hi === null ? ms : Math.max(hi, ms);
      }
    }
    return histogram(h, lo, hi, counts);
  }
  const f = ix.field(h.field);
  const s = numericSummary(f, m);
  if (s.n === 0) return [];
  // Checks the bucket limit before grouping anything.
  histogram(h, s.lo, s.hi, counts);
  // Values come sorted, so equal buckets come in runs: one map update per run.
  let key = NaN;
  let run = 0;
  numericSummary(f, m, (x) => {
    const k = numericKey(x, h.interval);
    if (k !== key) {
      if (run) add(key, run);
      key = k;
      run = 0;
    }
    run++;
  });
  if (run) add(key, run);
  return histogram(h, s.lo, s.hi, counts);
}

/** At most this many distinct values per field (as the SQL facets' LIMIT). */
const MAX_FACET_VALUES = 1000;

/**
 * content/fields facets: per field, value text → matching items holding it. The same top
 * values as the SQL (count descending, then numbers by value, then text in byte order), with
 * a string and a number or boolean of the same text summed under that text.
 */
export function indexFacets(ix: DatasetIndex, conditions: Condition[], fields: string[]): Facets {
  const m = matching(ix, conditions);
  const out: Facets = keyed();
  for (const field of fields) {
    const rows = valueCounts(ix.field(field), m).sort(
      (a, b) =>
        b.n - a.n ||
        (a.v.vtype === 'n'
          ? b.v.vtype === 'n'
            ? a.v.num - b.v.num
            : -1
          : b.v.vtype === 'n'
            ? 1
            : compareText(a.v.text, b.v.text)),
    );
    const counts = keyed<number>();
    for (const { v, n } of rows.slice(0, MAX_FACET_VALUES)) {
      const key = v.vtype === 'n' ? String(v.num) : v.text;
      counts[key] = (counts[key] ?? 0) + n;
    }
    out[field] = counts;
  }
  return out;
}
