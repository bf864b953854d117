import { isServiceTimeField } from '../../domain/limits';
import type { Figures } from '../../domain/figures';

/**
 * Contract §10 keys of a search response: `facets`, `stats` and `histograms`, present only when
 * asked for. Buckets of the service time fields carry ISO 8601 bounds.
 */
export function figuresBody(f: Figures | undefined): Record<string, unknown> {
  if (!f) return {};
  return {
    ...(f.facets ? { facets: f.facets } : {}),
    ...(f.stats ? { stats: f.stats } : {}),
    ...(f.histograms
      ? {
          histograms: Object.fromEntries(
            Object.entries(f.histograms).map(([field, buckets]) => [
              field,
              isServiceTimeField(field)
                ? buckets.map((b) => ({
                    from: new Date(b.from).toISOString(),
                    to: new Date(b.to).toISOString(),
                    count: b.count,
                  }))
                : buckets,
            ]),
          ),
        }
      : {}),
  };
}
