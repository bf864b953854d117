/**
 * Variants (interface.md, "Conventions for variants"; contract §13): items sharing a `parent`
 * value are one product. The catalogue shows one tile per product where the dataset has the field.
 */
import type { ResultEntry, SearchPage } from '../api';

/** The field whose values make the groups. */
export const GROUP_FIELD = 'parent';

/** `1 product`, `4 products`. */
export const counted = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The product a tile stands for, when it is one of several that may share it. */
export const groupOf = (r: ResultEntry) =>
  r.group && r.group.value !== null ? { value: r.group.value, count: r.group.count } : undefined;

/** What the results head counts: groups when the page came grouped, else items. */
export function totals(page: SearchPage): {
  shown: number;
  items: number;
  grouped: boolean;
  exact: boolean;
} {
  const grouped = page.total_groups !== undefined;
  return {
    shown: page.total_groups ?? page.total_results,
    items: page.total_results,
    grouped,
    exact: !grouped || page.total_groups_exact !== false,
  };
}
