/**
 * A brute-force model of the q conditions the end-to-end property tests generate (contract §5):
 * equality / any-of, exclusion and numeric ranges over plain metadata, and their q text.
 */
export type Value = string | number | boolean;
export type Md = Record<string, Value | Value[]>;

export type Cond =
  | { kind: 'eq'; field: string; values: string[] }
  | { kind: 'not'; field: string; values: string[] }
  | { kind: 'range'; field: string; gte: number; lte: number };

export const qOf = (cs: Cond[]) =>
  cs
    .map((c) =>
      c.kind === 'range'
        ? `${c.field}:${c.gte}:${c.lte}`
        : `${c.field}:${c.kind === 'not' ? '!' : ''}${c.values.map(encodeURIComponent).join('|')}`,
    )
    .join(',');

export const valuesOf = (md: Md, f: string): Value[] =>
  md[f] === undefined ? [] : Array.isArray(md[f]) ? (md[f] as Value[]) : [md[f] as Value];

const matchesValue = (v: Value, s: string) =>
  typeof v === 'number' ? Number(s) === v && s.trim() !== '' : String(v) === s;

export function holds(md: Md, c: Cond): boolean {
  const vs = valuesOf(md, c.field);
  if (c.kind === 'range') return vs.some((v) => typeof v === 'number' && v >= c.gte && v <= c.lte);
  const any = vs.some((v) => c.values.some((s) => matchesValue(v, s)));
  return c.kind === 'eq' ? any : !any;
}

/** Code-point order, as both engines sort text. */
export const cmpText = (a: string, b: string) => {
  const x = [...a].map((ch) => ch.codePointAt(0)!);
  const y = [...b].map((ch) => ch.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
};
