import {
  calendarKey,
  facetFigure,
  histogram,
  numberText,
  statsFigure,
  type FiguresSpec,
  type Figures,
  type HistogramSpec,
  type ValueCount,
} from '../../domain/figures';
import type { Condition } from '../../query/ast';
import { figuresBody, histogramsBody, type Dsl } from './dsl';
import { keyed } from '../../domain/keyed';

type Bucket = { key: number | string; doc_count: number };
type Terms = { buckets: Bucket[]; sum_other_doc_count: number };
type Stats = { count: number; min: number | null; max: number | null; sum: number };
type Aggs = Record<string, unknown>;
interface FacetAgg {
  q?: {
    doc_count: number;
    v?: { sel?: { s?: Terms; n?: Terms; items?: { doc_count: number } } };
  };
}
/** Stats of nested values (under `sel.s`) or of a top-level field. */
type StatsAgg = { sel?: { s?: Stats } } & Partial<Stats>;
type HistAgg = { sel?: { h?: { buckets: Bucket[] } }; buckets?: Bucket[] };

/** Sends a body to the dataset's index; undefined when the dataset has no index yet. */
export type AggQuery = (body: Dsl) => Promise<Aggs | undefined>;

const stats = (a: unknown): Stats | undefined =>
  a === undefined ? undefined : (((a as StatsAgg).sel?.s ?? a) as Stats);

/**
 * Contract §10 on Elasticsearch: two rounds of aggregations (dsl.ts), read back into the same
 * domain figures as the embedded engine. A dataset without an index answers as empty.
 */
export async function esFigures(
  query: AggQuery,
  conditions: Condition[],
  spec: FiguresSpec,
): Promise<Figures> {
  const first = await query(figuresBody(conditions, spec));
  const aggs = first ?? {};
  const out: Figures = {};
  if (spec.facets.length) {
    out.facets = keyed();
    spec.facets.forEach(({ field }, i) => {
      const q = (aggs[`facet${i}`] as FacetAgg | undefined)?.q;
      const sel = q?.v?.sel;
      const values: ValueCount[] = [];
      let unlisted = 0;
      for (const kind of ['s', 'n'] as const) {
        const t = sel?.[kind] as Terms | undefined;
        if (!t) continue;
        unlisted += t.sum_other_doc_count;
        for (const b of t.buckets)
          values.push(
            kind === 'n'
              ? { num: Number(b.key), text: numberText(Number(b.key)), count: b.doc_count }
              : { text: String(b.key), count: b.doc_count },
          );
      }
      const total = q?.doc_count ?? 0;
      const holding = sel?.items?.doc_count ?? 0;
      const figure = facetFigure(values, spec.facetSize, total - holding);
      // Values beyond each engine round's top list still count in `other`.
      out.facets![field] = { ...figure, other: figure.other + unlisted };
    });
  }
  if (spec.stats.length) {
    out.stats = keyed();
    spec.stats.forEach((field, i) => {
      const s = stats(aggs[`stats${i}`]);
      out.stats![field] = statsFigure(s?.count ?? 0, s?.min ?? 0, s?.max ?? 0, s?.sum ?? 0);
    });
  }
  if (spec.histograms.length) {
    out.histograms = keyed();
    const ranges = spec.histograms.map((_, i) => stats(aggs[`range${i}`]));
    // The bucket limit is checked (400) before Elasticsearch is asked for any bucket.
    spec.histograms.forEach((h, i) =>
      histogram(h, ranges[i]?.min ?? null, ranges[i]?.max ?? null, new Map()),
    );
    const wanted = spec.histograms.filter((_, i) => (ranges[i]?.count ?? 0) > 0);
    const second = wanted.length ? await query(histogramsBody(conditions, wanted)) : undefined;
    spec.histograms.forEach((h, i) => {
      const at = wanted.indexOf(h);
      const a = (at >= 0 ? second?.[`hist${at}`] : undefined) as HistAgg | undefined;
      out.histograms![h.field] = histogram(
        h,
        ranges[i]?.min ?? null,
        ranges[i]?.max ?? null,
        counts(h, (a?.sel?.h ?? a)?.buckets ?? []),
      );
    });
  }
  return out;
}

function counts(h: HistogramSpec, buckets: Bucket[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const b of buckets) {
    const key = 'calendar' in h ? calendarKey(Number(b.key), h.calendar) : Number(b.key);
    m.set(key, (m.get(key) ?? 0) + b.doc_count);
  }
  return m;
}
