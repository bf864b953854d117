/**
 * What the catalogue shows lives in the address bar's query string, so a reload or a shared link
 * opens the same page, and back and forward step through what the user did. Only choices that
 * differ from the defaults are written. The token never is: it arrives in the fragment, which
 * session.ts strips at once.
 */

export type Order = 'asc' | 'desc';

export interface View {
  /** The filter text, exactly as the `q` parameter sends it. */
  q: string;
  sort: string;
  order: Order;
  page: number;
  limit: number;
  /** The field tiles are titled by (`id` for the id); unset: the dataset's name-like field. */
  title?: string;
  /**
   * Every variant as its own tile, rather than one tile per product (contract §13). Only a
   * dataset with a `parent` field groups, so grouping is the default where it means anything.
   */
  allVariants: boolean;
  /**
   * Similar items (the detail panel's, and search by photo's) asked with `diversity` (contract
   * §15), so that a page is not a row of near-copies of one picture.
   */
  vary: boolean;
}

export const PAGE_SIZES = [12, 24, 48];
const MAX_WINDOW = 10_000; // page × limit (contract §6)

export const DEFAULT_VIEW: View = {
  q: '',
  sort: 'service_updated_at',
  order: 'desc',
  page: 1,
  limit: 24,
  allVariants: false,
  vary: false,
};

const positive = (s: string | null): number | undefined => {
  const n = s === null ? NaN : Number(s);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
};

/** The view a query string describes; a missing or unusable parameter takes its default. */
function readView(p: URLSearchParams): View {
  const d = DEFAULT_VIEW;
  const limitParam = positive(p.get('limit'));
  const limit = limitParam !== undefined && PAGE_SIZES.includes(limitParam) ? limitParam : d.limit;
  const order = p.get('order');
  return {
    q: p.get('q') ?? d.q,
    sort: p.get('sort') || d.sort,
    order: order === 'asc' || order === 'desc' ? order : d.order,
    page: Math.min(positive(p.get('page')) ?? d.page, Math.floor(MAX_WINDOW / limit)),
    limit,
    ...(p.get('title') ? { title: p.get('title')! } : {}),
    allVariants: p.get('variants') === 'all',
    vary: p.get('similar') === 'varied',
  };
}

/** The dataset and view in the address bar now. */
export function readLocation(): { dataset?: string; view: View } {
  const p = new URLSearchParams(location.search);
  return { dataset: p.get('dataset') || undefined, view: readView(p) };
}

/** The address of a dataset's view (no dataset: the console's start). */
export function addressOf(dataset?: string, view: View = DEFAULT_VIEW): string {
  const p = new URLSearchParams();
  if (dataset) p.set('dataset', dataset);
  for (const key of ['q', 'sort', 'order', 'page', 'limit', 'title'] as const) {
    const v = view[key];
    if (v !== undefined && v !== DEFAULT_VIEW[key]) p.set(key, String(v));
  }
  if (view.allVariants) p.set('variants', 'all');
  if (view.vary) p.set('similar', 'varied');
  // Readable in the address bar: `q=group:Fruits`, not `q=group%3AFruits`.
  const s = p.toString().replace(/%3A/gi, ':').replace(/%7C/gi, '|').replace(/%2C/gi, ',');
  return location.pathname + (s ? `?${s}` : '');
}

/** Puts `address` in the bar: a new history entry, or in place of the current one. */
export function navigate(address: string, how: 'push' | 'replace'): void {
  const here = location.pathname + location.search;
  if (address === here) return;
  if (how === 'push') history.pushState(null, '', address);
  else history.replaceState(null, '', address);
}

/** Which groups the near-duplicate report shows (contract §18): `both` asks for no `kind`. */
export type DuplicateChoice = 'both' | 'exact' | 'near';

/** The near-duplicate report's choices, in the address with `?duplicates=<dataset>`. */
export interface DuplicatesView {
  kind: DuplicateChoice;
  /** Leave out pairs of items sharing `parent` (variants of one product). */
  excludeSameParent: boolean;
}

export const DEFAULT_DUPLICATES_VIEW: DuplicatesView = { kind: 'both', excludeSameParent: false };

/** The dataset whose duplicates the address shows, if any, and the report's choices. */
export function readDuplicates(): { dataset?: string; view: DuplicatesView } {
  const p = new URLSearchParams(location.search);
  const kind = p.get('kind');
  return {
    dataset: p.get('duplicates') || undefined,
    view: {
      kind: kind === 'exact' || kind === 'near' ? kind : 'both',
      excludeSameParent: p.get('exclude_same_parent') === 'true',
    },
  };
}

/** The address of a dataset's near-duplicate report. */
export function duplicatesAddress(dataset: string, view = DEFAULT_DUPLICATES_VIEW): string {
  const p = new URLSearchParams({ duplicates: dataset });
  if (view.kind !== 'both') p.set('kind', view.kind);
  if (view.excludeSameParent) p.set('exclude_same_parent', 'true');
  return `${location.pathname}?${p.toString()}`;
}
