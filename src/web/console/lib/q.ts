/**
 * Builds the `q` filter (contract §5) from what the user typed and what the sidebar selects.
 * The typed text goes first and unchanged, so an error position the API reports points into it;
 * sidebar values are percent-encoded one by one, as the grammar asks.
 */

export interface Range {
  min?: number;
  max?: number;
}

export interface Filters {
  /** Facet field → selected values (any of them). */
  selected: Record<string, string[]>;
  /** Numeric field → inclusive range. */
  ranges: Record<string, Range>;
}

export const noFilters = (): Filters => ({ selected: {}, ranges: {} });

/** Sidebar selections as q filters (no typed text). */
export function filterTerms(f: Filters): string[] {
  const terms: string[] = [];
  for (const [field, values] of Object.entries(f.selected))
    if (values.length)
      terms.push(`${encodeURIComponent(field)}:${values.map(encodeURIComponent).join('|')}`);
  for (const [field, r] of Object.entries(f.ranges))
    if (r.min !== undefined || r.max !== undefined)
      terms.push(`${encodeURIComponent(field)}:${r.min ?? ''}:${r.max ?? ''}`);
  return terms;
}

export function composeQ(typed: string, f: Filters): string {
  const text = typed.trim() === '' ? '' : typed;
  return [text, ...filterTerms(f)].filter((s) => s !== '').join(',');
}

/** Field names the console never offers as facets or ranges (generated, time, text search). */
export const SERVICE_FIELDS = new Set([
  'image_width',
  'image_height',
  'image_url',
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
