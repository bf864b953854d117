/** Helpers for the `q` filter (contract §5) and the figures the sidebar shows. */

/** An inclusive range of a numeric field; one bound may be missing. */
export interface Range {
  min?: number;
  max?: number;
}

/**
 * Field names the console never offers as facets or ranges (generated, time, text search). The
 * popularity counts (contract §14) are sorts for a shopper, not filters: the sort menu names them.
 */
export const SERVICE_FIELDS = new Set([
  'image_width',
  'image_height',
  'image_url',
  'service_popularity',
  'service_purchases',
  'service_created_at',
  'service_updated_at',
  'text',
]);

/** An interval of 1, 2 or 5 × 10^n giving about `buckets` bars over [min, max]. */
export function niceInterval(min: number, max: number, buckets = 8): number {
  const span = max - min;
  if (!(span > 0)) return 1;
  const raw = span / buckets;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * pow >= raw) ?? 10;
  return step * pow;
}

export function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(2)));
}
