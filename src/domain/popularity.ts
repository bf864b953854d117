import { invalid } from './errors';
import { LIMITS } from './limits';
import { CLICK_ACTION } from './report';

/** The tracked action that counts toward `service_purchases` (`a:purchase`). */
export const PURCHASE_ACTION = 'purchase';

/**
 * An item's counts over the trailing window (contract §14): `a:click` events and the `qty` of
 * `a:purchase` events that name it with `id`.
 */
export interface ItemCounts {
  popularity: number;
  purchases: number;
}

export const NO_COUNTS: ItemCounts = { popularity: 0, purchases: 0 };

export const sameCounts = (a: ItemCounts, b: ItemCounts): boolean =>
  a.popularity === b.popularity && a.purchases === b.purchases;

/** The counts as generated fields, by their REST names. */
export const countFields = (
  c: ItemCounts,
): { service_popularity: number; service_purchases: number } => ({
  service_popularity: c.popularity,
  service_purchases: c.purchases,
});

/**
 * `qty` of a purchase: a positive integer (default 1). Checked when the event is tracked, so
 * what the log holds always counts.
 */
export function parseQty(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > LIMITS.trackMaxQty)
    throw invalid(`qty must be a positive integer up to ${LIMITS.trackMaxQty}; got '${raw}'`, [
      { field: 'qty', value: raw, message: `a positive integer, at most ${LIMITS.trackMaxQty}` },
    ]);
  return n;
}

/**
 * What a logged event adds to its item's counts, or undefined when it counts toward neither:
 * a tracked click or purchase that names an item with `id`.
 */
export function countedEvent(e: {
  kind: 'request' | 'track';
  type: string;
  vars?: Record<string, string>;
}): { itemId: string; qty: number } | undefined {
  if (e.kind !== 'track') return undefined;
  if (e.type !== CLICK_ACTION && e.type !== PURCHASE_ACTION) return undefined;
  const itemId = e.vars?.id;
  if (!itemId) return undefined;
  if (e.type === CLICK_ACTION) return { itemId, qty: 1 };
  try {
    return { itemId, qty: parseQty(e.vars?.qty) };
  } catch {
    // logged before qty was checked: one purchase
    return { itemId, qty: 1 };
  }
}
