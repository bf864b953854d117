/**
 * Metadata value types. interface.md allows string, number, boolean and a simple array whose
 * elements are all strings or all numbers; nothing else (no dates, no objects). CSV cells are
 * inferred (integer/float → number, true/false → boolean, else string) unless `--types`
 * declares the column. Pure.
 */

export type FieldType = 'string' | 'number' | 'boolean' | 'string[]' | 'number[]';
export type Value = string | number | boolean | string[] | number[];

const TYPE_NAMES: Record<string, FieldType> = {
  string: 'string',
  number: 'number',
  boolean: 'boolean',
  array: 'string[]',
  'string[]': 'string[]',
  'number[]': 'number[]',
  'array:string': 'string[]',
  'array:number': 'number[]',
};

/** Separator of array elements in a CSV cell (or a JSON string declared as an array). */
const ARRAY_SEPARATOR = '|';

/** `price=number,tags=array` → field → type; throws an Error naming every bad entry. */
export function parseTypes(spec: string | undefined): Map<string, FieldType> {
  const out = new Map<string, FieldType>();
  if (!spec) return out;
  const problems: string[] = [];
  for (const part of spec.split(',')) {
    const entry = part.trim();
    if (!entry) continue;
    const eq = entry.lastIndexOf('=');
    const name = eq > 0 ? entry.slice(0, eq).trim() : '';
    const typeName =
      eq > 0
        ? entry
            .slice(eq + 1)
            .trim()
            .toLowerCase()
        : '';
    if (!name || !typeName) {
      problems.push(`'${entry}': expected field=type`);
      continue;
    }
    const t = TYPE_NAMES[typeName];
    if (t) out.set(name, t);
    else if (typeName === 'date' || typeName === 'datetime')
      problems.push(
        `'${entry}': the service has no date type (metadata values are string, number, boolean or arrays of strings or numbers); ` +
          `declare it string and write ISO 8601 (it sorts and ranges correctly), or number for epoch milliseconds`,
      );
    else
      problems.push(
        `'${entry}': unknown type '${typeName}' (string, number, boolean, array, number[])`,
      );
  }
  if (problems.length) throw new Error(`--types: ${problems.join('; ')}`);
  return out;
}

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const BOOLEAN: Record<string, boolean> = { true: true, false: false };

/**
 * The value of an undeclared CSV cell: a number when it is written as one and survives the
 * round trip (no leading zeros as in `007`, integers within 2^53, so codes keep their digits),
 * a boolean for true/false (any case), else the string as it is.
 */
export function inferValue(raw: string): string | number | boolean {
  const t = raw.trim();
  if (NUMBER.test(t)) {
    const n = Number(t);
    const integer = !/[.eE]/.test(t);
    if (Number.isFinite(n) && (!integer || Number.isSafeInteger(n))) return n;
    return raw;
  }
  const b = BOOLEAN[t.toLowerCase()];
  return b ?? raw;
}

const DECLARED_BOOLEAN: Record<string, boolean> = {
  true: true,
  false: false,
  yes: true,
  no: false,
  '1': true,
  '0': false,
};

function toNumber(raw: string): number | undefined {
  const t = raw.trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}

/** Converts text to a declared type; `error` says why it cannot be. */
export function convertValue(raw: string, type: FieldType): { value: Value } | { error: string } {
  switch (type) {
    case 'string':
      return { value: raw };
    case 'number': {
      const n = toNumber(raw);
      return n === undefined ? { error: `'${clip(raw)}' is not a number` } : { value: n };
    }
    case 'boolean': {
      const b = DECLARED_BOOLEAN[raw.trim().toLowerCase()];
      return b === undefined
        ? { error: `'${clip(raw)}' is not a boolean (true/false, yes/no, 1/0)` }
        : { value: b };
    }
    case 'string[]':
      return { value: splitArray(raw) };
    case 'number[]': {
      const out: number[] = [];
      for (const e of splitArray(raw)) {
        const n = toNumber(e);
        if (n === undefined) return { error: `array element '${clip(e)}' is not a number` };
        out.push(n);
      }
      return { value: out };
    }
  }
}

function splitArray(raw: string): string[] {
  return raw
    .split(ARRAY_SEPARATOR)
    .map((e) => e.trim())
    .filter((e) => e !== '');
}

const clip = (s: string): string => (s.length > 40 ? `${s.slice(0, 40)}…` : s);
