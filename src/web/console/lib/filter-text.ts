/**
 * The filter text is the one state behind both the `q` bar and the sidebar (contract §5): the
 * sidebar's boxes and ranges are read from it, and ticking a box or setting a range rewrites the
 * text. Only the clauses the sidebar can show are read: `field:a|b` (any of these values) and
 * `field:min:max`. Everything else (exclusions, `text:`, a field named twice, a malformed piece)
 * stays in the text untouched, and the field it names is left to the text alone.
 */
import type { Range } from './q';

type Clause =
  { kind: 'any'; field: string; values: string[] } | { kind: 'range'; field: string; range: Range };

interface Piece {
  raw: string;
  /** The field the piece names, when its key decodes. */
  field?: string;
  /** What the piece means, when the sidebar can show it. */
  clause?: Clause;
}

export interface Selection {
  /** Field → the values of its one `field:a|b` clause. */
  values: Record<string, string[]>;
  /** Field → the bounds of its one `field:min:max` clause. */
  ranges: Record<string, Range>;
  /** Fields the text filters in a way the sidebar cannot show. */
  textOnly: Set<string>;
}

const decode = (s: string): string | undefined => {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
};

const bound = (raw: string): number | undefined | null => {
  if (raw === '') return undefined;
  const s = decode(raw);
  const n = s === undefined || s.trim() === '' ? NaN : Number(s);
  return Number.isFinite(n) ? n : null;
};

function parsePiece(raw: string): Piece {
  const parts = raw.split(':');
  const field = parts.length > 1 ? decode(parts[0]) : undefined;
  if (!field || field === 'text') return { raw, field };
  if (parts.length === 3) {
    const min = bound(parts[1]);
    const max = bound(parts[2]);
    if (min === null || max === null || (min === undefined && max === undefined))
      return { raw, field };
    if (min !== undefined && max !== undefined && min > max) return { raw, field };
    return { raw, field, clause: { kind: 'range', field, range: { min, max } } };
  }
  if (parts.length !== 2) return { raw, field };
  const values = parts[1].split('|').map(decode);
  if (values.some((v) => !v || v.startsWith('!'))) return { raw, field };
  return { raw, field, clause: { kind: 'any', field, values: [...new Set(values as string[])] } };
}

const split = (text: string): Piece[] =>
  text.trim() === '' ? [] : text.split(',').map(parsePiece);

/** What the sidebar shows for this filter text. */
export function selection(text: string): Selection {
  const byField = new Map<string, Piece[]>();
  for (const p of split(text))
    if (p.field !== undefined) byField.set(p.field, [...(byField.get(p.field) ?? []), p]);
  const s: Selection = { values: {}, ranges: {}, textOnly: new Set() };
  for (const [field, pieces] of byField) {
    const c = pieces.length === 1 ? pieces[0].clause : undefined;
    if (c?.kind === 'any') s.values[field] = c.values;
    else if (c?.kind === 'range') s.ranges[field] = c.range;
    else s.textOnly.add(field);
  }
  return s;
}

/**
 * Characters the grammar reads as syntax are percent-encoded, the rest is left readable
 * (`Green Leafy Vegetables` rather than `Green%20Leafy%20Vegetables`).
 */
const encode = (s: string): string =>
  s
    .replace(/[%,:|]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/^!/, '%21');

function clauseText(c: Clause): string {
  if (c.kind === 'any') return `${encode(c.field)}:${c.values.map(encode).join('|')}`;
  return `${encode(c.field)}:${c.range.min ?? ''}:${c.range.max ?? ''}`;
}

/**
 * The text with `field`'s clause replaced by `clause` (or removed, when undefined), in place; a
 * new clause goes at the end. A field the sidebar cannot show is left as it is.
 */
function withClause(text: string, field: string, clause: Clause | undefined): string {
  if (selection(text).textOnly.has(field)) return text;
  const parsed = split(text);
  const pieces = parsed.map((p) => p.raw);
  const at = parsed.findIndex((p) => p.field === field);
  const raw = clause ? clauseText(clause) : undefined;
  if (at >= 0) {
    if (raw === undefined) pieces.splice(at, 1);
    else pieces[at] = raw;
  } else if (raw !== undefined) {
    // A trailing comma already leaves room for one more clause.
    if (pieces.length && pieces[pieces.length - 1] === '') pieces[pieces.length - 1] = raw;
    else pieces.push(raw);
  }
  return pieces.join(',');
}

/** The text with `field` filtered to any of `values` (none: no condition on it). */
export const withValues = (text: string, field: string, values: string[]): string =>
  withClause(text, field, values.length ? { kind: 'any', field, values } : undefined);

/** The text with `field` limited to `range` (no bound: no condition on it). */
export const withRange = (text: string, field: string, range: Range): string =>
  withClause(
    text,
    field,
    range.min !== undefined || range.max !== undefined
      ? { kind: 'range', field, range }
      : undefined,
  );

/** The text without the sidebar's conditions on these fields. */
export const withoutFields = (text: string, fields: string[]): string =>
  fields.reduce((t, f) => withClause(t, f, undefined), text);
