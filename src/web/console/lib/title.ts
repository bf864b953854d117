/**
 * What a tile is titled by: a name-like field of the dataset when it has one, else the id. The
 * user's choice is kept per dataset in localStorage (a preference, not a secret), and in the
 * address so a shared link shows the same titles.
 */
import type { ResultEntry } from '../api';

/** The title choice that means "the item's id". */
export const ID_TITLE = 'id';

const NAME_LIKE = ['name', 'title', 'product_name', 'label'];

const key = (org: string, dataset: string) => `vss-console-title:${org}/${dataset}`;

export function rememberedTitle(org: string, dataset: string): string | undefined {
  try {
    return localStorage.getItem(key(org, dataset)) ?? undefined;
  } catch {
    return undefined;
  }
}

export function rememberTitle(org: string, dataset: string, field: string): void {
  try {
    localStorage.setItem(key(org, dataset), field);
  } catch {
    // Storage can be off (private windows); the address still carries the choice.
  }
}

/** `name`, then `title`, then another name-like string field; the id when there is none. */
export function defaultTitle(stringFields: string[]): string {
  return (
    NAME_LIKE.find((f) => stringFields.includes(f)) ??
    stringFields.find((f) => /(^|_)(name|title)$/i.test(f)) ??
    ID_TITLE
  );
}

/** The item's title under this choice; the id when the item lacks the field. */
export function titleOf(r: ResultEntry, field: string): string {
  if (field === ID_TITLE) return r.id;
  const v = r.metadata[field];
  if (typeof v === 'string' && v.trim() !== '') return v;
  if (typeof v === 'number') return String(v);
  if (Array.isArray(v) && v.length) return v.join(', ');
  return r.id;
}
