import { invalid, type ErrorDetail } from '../domain/errors';
import { LIMITS, TEXT_FIELD, isServiceTimeField } from '../domain/limits';
import { parseNumber, type Filter } from './ast';
import { textTerms } from './text';

class QError {
  constructor(
    readonly position: number,
    readonly message: string,
  ) {}
}

/** Percent-decodes one piece of q, pointing at the broken escape when there is one. */
function decodePiece(raw: string, start: number): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    const bad = /%(?![0-9A-Fa-f]{2})/.exec(raw);
    throw new QError(start + (bad ? bad.index : 0), `invalid percent-encoding in '${raw}'`);
  }
}

function parseBound(raw: string, start: number, key: string): number | undefined {
  if (raw === '') return undefined;
  const s = decodePiece(raw, start);
  if (isServiceTimeField(key)) {
    const n = parseNumber(s);
    if (n !== undefined && Number.isInteger(n)) return n;
    const iso = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(
      s,
    );
    const t = iso ? Date.parse(s) : NaN;
    if (Number.isNaN(t))
      throw new QError(
        start,
        `range bound '${s}' of ${key} must be an ISO 8601 date or epoch milliseconds`,
      );
    return t;
  }
  const n = parseNumber(s);
  if (n === undefined) throw new QError(start, `range bound '${s}' is not a number`);
  return n;
}

function parseFilter(raw: string, pos: number): Filter {
  if (raw.length === 0)
    throw new QError(pos, 'empty filter (two commas in a row, or a trailing comma)');
  const parts = raw.split(':');
  if (parts.length === 1) throw new QError(pos, `filter '${raw}' needs the form key:value`);
  const key = decodePiece(parts[0], pos);
  if (key.length === 0) throw new QError(pos, 'filter key is empty');
  const valueStart = pos + parts[0].length + 1;

  if (parts.length === 3) {
    const maxStart = valueStart + parts[1].length + 1;
    if (key === TEXT_FIELD) throw new QError(valueStart, 'text search takes words, not a range');
    const gte = parseBound(parts[1], valueStart, key);
    const lte = parseBound(parts[2], maxStart, key);
    if (gte === undefined && lte === undefined)
      throw new QError(valueStart, `range on '${key}' needs at least one bound (key:min:max)`);
    if (gte !== undefined && lte !== undefined && gte > lte)
      throw new QError(valueStart, `range on '${key}' has min ${gte} above max ${lte}`);
    return {
      kind: 'range',
      key,
      ...(gte !== undefined ? { gte } : {}),
      ...(lte !== undefined ? { lte } : {}),
      pos,
    };
  }
  if (parts.length > 3) {
    const third = pos + parts.slice(0, 3).join(':').length;
    throw new QError(third, `too many ':' in filter '${raw}' (encode ':' inside a value as %3A)`);
  }

  const rawValue = parts[1];
  if (rawValue.length === 0) throw new QError(valueStart, `filter '${key}' has an empty value`);
  if (key === TEXT_FIELD) {
    const terms = textTerms(decodePiece(rawValue, valueStart));
    if (terms.length === 0) throw new QError(valueStart, 'text search needs at least one word');
    return { kind: 'text', terms, pos };
  }
  if (isServiceTimeField(key))
    throw new QError(pos, `${key} can only be filtered by range (${key}:from:to)`);

  const values: string[] = [];
  let negated = false;
  let offset = valueStart;
  rawValue.split('|').forEach((alt, i) => {
    let v = decodePiece(alt, offset);
    if (v.startsWith('!')) {
      if (i === 0) negated = true;
      else if (!negated)
        throw new QError(
          offset,
          "'!' must prefix the first value of the list (key:!a|b excludes a and b)",
        );
      v = v.slice(1);
    }
    if (v.length === 0) throw new QError(offset, `filter '${key}' has an empty value`);
    values.push(v);
    offset += alt.length + 1;
  });
  return { kind: negated ? 'not' : 'eq', key, values: [...new Set(values)], pos };
}

/**
 * Parses q (already URL-decoded once by the transport) into filters. Every malformed filter
 * is reported with its 0-based character position in q.
 */
export function parseQ(q: string | undefined): Filter[] {
  if (q === undefined || q === '') return [];
  if (q.length > LIMITS.qMaxLength)
    throw invalid(`q is ${q.length} characters; at most ${LIMITS.qMaxLength}`, [
      { param: 'q', position: LIMITS.qMaxLength, message: 'q is too long' },
    ]);
  const filters: Filter[] = [];
  const problems: ErrorDetail[] = [];
  let pos = 0;
  for (const raw of q.split(',')) {
    try {
      filters.push(parseFilter(raw, pos));
    } catch (e) {
      if (!(e instanceof QError)) throw e;
      problems.push({ param: 'q', position: e.position, message: e.message });
    }
    pos += raw.length + 1;
  }
  if (problems.length) {
    const first = problems[0];
    throw invalid(`malformed q at position ${first.position}: ${first.message}`, problems);
  }
  return filters;
}
