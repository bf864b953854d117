import type { FiguresSpec, Figures, HistogramSpec } from '../../domain/figures';
import { LIMITS } from '../../domain/limits';
import { invalid } from '../../domain/errors';
import { isServiceTimeField } from '../../domain/limits';
import type {
  FacetInput,
  FieldHistogram,
  FieldStats,
  HistogramInput,
  SearchFacet,
} from './types/figures';

/** Typed GraphQL input to the figures request the service checks (domain/figures.ts). */
export function figuresSpec(a: {
  facets?: FacetInput[] | null;
  facetSize?: number | null;
  stats?: string[] | null;
  histograms?: HistogramInput[] | null;
}): FiguresSpec {
  return {
    facets: (a.facets ?? []).map((f) => ({ field: f.field, disjunctive: f.disjunctive })),
    facetSize: a.facetSize ?? LIMITS.facetSizeDefault,
    stats: a.stats ?? [],
    histograms: (a.histograms ?? []).map((h): HistogramSpec => {
      const given = (h.interval != null ? 1 : 0) + (h.calendar != null ? 1 : 0);
      if (given !== 1)
        throw invalid(`histogram '${h.field}' needs exactly one of interval or calendar`, [
          { param: 'histograms', field: h.field, message: 'one of interval or calendar' },
        ]);
      return h.calendar != null
        ? ({ field: h.field, calendar: h.calendar } as HistogramSpec)
        : { field: h.field, interval: h.interval! };
    }),
  };
}

export function figuresOut(f: Figures | undefined): {
  facets?: SearchFacet[];
  stats?: FieldStats[];
  histograms?: FieldHistogram[];
} {
  if (!f) return {};
  return {
    ...(f.facets
      ? {
          facets: Object.entries(f.facets).map(([field, v]) => ({
            field,
            ...v,
            exact: v.exact ?? true,
          })),
        }
      : {}),
    ...(f.stats ? { stats: Object.entries(f.stats).map(([field, v]) => ({ field, ...v })) } : {}),
    ...(f.histograms
      ? {
          histograms: Object.entries(f.histograms).map(([field, buckets]) => ({
            field,
            buckets: buckets.map((b) =>
              isServiceTimeField(field)
                ? {
                    ...b,
                    fromTime: new Date(b.from).toISOString(),
                    toTime: new Date(b.to).toISOString(),
                  }
                : b,
            ),
          })),
        }
      : {}),
  };
}
