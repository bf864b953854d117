/**
 * The q filter, parsed once (parse.ts) and resolved against the dataset (resolve.ts).
 * Engines lower `Condition[]` (all must hold) to their own query language.
 */
import type { ServiceTimeField } from '../domain/limits';

/** What the parser saw, with the offset of the filter in `q` for error messages. */
export type Filter =
  | { kind: 'eq'; key: string; values: string[]; pos: number }
  | { kind: 'not'; key: string; values: string[]; pos: number }
  | { kind: 'range'; key: string; gte?: number; lte?: number; pos: number }
  | { kind: 'text'; terms: string[]; pos: number };

/** What engines execute. Values stay strings: see `literalForms` for how they match. */
export type Condition =
  | { kind: 'match'; field: string; values: string[] }
  | { kind: 'exclude'; field: string; values: string[] }
  | { kind: 'range'; field: string; gte?: number; lte?: number }
  | { kind: 'timeRange'; field: ServiceTimeField; gte?: number; lte?: number }
  | { kind: 'text'; terms: string[] }
  /** The field holds a value (typed GraphQL filters; q has no such form). */
  | { kind: 'exists'; field: string }
  /** Any of these conjunctions holds (GraphQL `or`). */
  | { kind: 'any'; of: Condition[][] }
  /** Not all of these hold (GraphQL `not`). */
  | { kind: 'none'; of: Condition[] }
  /** The item is one of these (a scoped token's reads by id; q has no such form). */
  | { kind: 'ids'; ids: string[] };

export interface LiteralForms {
  str: string;
  num?: number;
  bool?: boolean;
}

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

export function parseNumber(s: string): number | undefined {
  if (!NUMBER.test(s)) return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * A q value matches a stored string exactly, a stored number when it parses as that number,
 * and a stored boolean when it is `true`/`false` (contract §5).
 */
export function literalForms(s: string): LiteralForms {
  const num = parseNumber(s);
  return {
    str: s,
    ...(num !== undefined ? { num } : {}),
    ...(s === 'true' ? { bool: true } : s === 'false' ? { bool: false } : {}),
  };
}
