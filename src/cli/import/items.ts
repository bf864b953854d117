/**
 * Input records → content items as POST content takes them (interface.md §4). Only what is
 * needed to build a well-formed request is checked here (an object, an id within the limit, a
 * url); the server judges everything else (url format, metadata rules) and the importer reports
 * its verdict per item. Pure.
 */
import { LIMITS } from '../../domain/limits';
import { convertValue, inferValue, type FieldType, type Value } from './types';

export interface ContentItem {
  id: string;
  url: string;
  metadata?: Record<string, unknown>;
  privateMetadata?: Record<string, unknown>;
}

export type Parsed = { ok: true; item: ContentItem } | { ok: false; reason: string; id?: string };

/** Sets an own property, even for keys such as `__proto__` that plain assignment treats apart. */
const put = (o: Record<string, unknown>, k: string, v: unknown): void => {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function checkIdUrl(id: unknown, url: unknown): { id: string; url: string } | Parsed {
  let sid: string;
  if (typeof id === 'string') sid = id;
  else if (typeof id === 'number' && Number.isSafeInteger(id)) sid = String(id);
  else if (id === undefined || id === null || id === '') return { ok: false, reason: 'missing id' };
  else return { ok: false, reason: 'id must be a string' };
  if (sid === '') return { ok: false, reason: 'missing id' };
  if (sid.length > LIMITS.itemIdMaxLength)
    return {
      ok: false,
      reason: `id is ${sid.length} characters; at most ${LIMITS.itemIdMaxLength}`,
    };
  if (url === undefined || url === null || url === '')
    return { ok: false, reason: 'missing url', id: sid };
  if (typeof url !== 'string') return { ok: false, reason: 'url must be a string', id: sid };
  return { id: sid, url };
}

/**
 * One JSON Lines record: `{ id, url, metadata?, privateMetadata? }`, or metadata given as the
 * other top-level keys (`{ id, url, price: 10 }`); both may be combined when they name
 * different keys. String values of fields declared in `types` are converted.
 */
export function itemFromJsonLine(text: string, types: Map<string, FieldType>): Parsed {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `invalid JSON: ${(e as Error).message}` };
  }
  if (!isObject(raw)) return { ok: false, reason: 'a line must hold a JSON object' };
  const { id, url, metadata, privateMetadata, ...rest } = raw;
  const base = checkIdUrl(id, url);
  if ('ok' in base) return base;
  if (metadata !== undefined && !isObject(metadata))
    return { ok: false, reason: 'metadata must be a JSON object', id: base.id };
  if (privateMetadata !== undefined && !isObject(privateMetadata))
    return { ok: false, reason: 'privateMetadata must be a JSON object', id: base.id };
  let meta: Record<string, unknown> | undefined;
  if (metadata !== undefined || Object.keys(rest).length > 0) {
    meta = { ...(metadata ?? {}) };
    for (const [k, v] of Object.entries(rest)) {
      if (Object.hasOwn(meta, k))
        return {
          ok: false,
          reason: `'${k}' is given both at the top level and in metadata`,
          id: base.id,
        };
      put(meta, k, v);
    }
    for (const [k, t] of types) {
      const v = Object.hasOwn(meta, k) ? meta[k] : undefined;
      if (typeof v !== 'string') continue;
      const c = convertValue(v, t);
      if ('error' in c) return { ok: false, reason: `${k}: ${c.error}`, id: base.id };
      put(meta, k, c.value);
    }
  }
  return {
    ok: true,
    item: {
      ...base,
      ...(meta ? { metadata: meta } : {}),
      ...(privateMetadata !== undefined ? { privateMetadata } : {}),
    },
  };
}

/** Maps CSV records to items through the header row. */
export class CsvItems {
  private readonly idCol: number;
  private readonly urlCol: number;
  private readonly meta: Array<{ col: number; name: string; type?: FieldType }> = [];

  /** Throws (a fatal error: no row can be read) when the header is unusable. */
  constructor(
    private readonly header: string[],
    types: Map<string, FieldType>,
  ) {
    const seen = new Set<string>();
    const dup = new Set<string>();
    const names = header.map((h) => h.trim());
    for (const n of names) (seen.has(n) ? dup : seen).add(n);
    const problems: string[] = [];
    if (!seen.has('id')) problems.push("no 'id' column");
    if (!seen.has('url')) problems.push("no 'url' column");
    if (dup.size) problems.push(`repeated columns: ${[...dup].join(', ')}`);
    if (names.some((n) => n === '')) problems.push('a column has no name');
    for (const k of types.keys())
      if (!seen.has(k)) problems.push(`--types names '${k}', which is not a column`);
    if (problems.length) throw new Error(`CSV header: ${problems.join('; ')}`);
    this.idCol = names.indexOf('id');
    this.urlCol = names.indexOf('url');
    names.forEach((name, col) => {
      if (col !== this.idCol && col !== this.urlCol)
        this.meta.push({ col, name, ...(types.has(name) ? { type: types.get(name) } : {}) });
    });
  }

  map(fields: string[]): Parsed {
    if (fields.length !== this.header.length)
      return {
        ok: false,
        reason: `row has ${fields.length} fields; the header has ${this.header.length}`,
      };
    const base = checkIdUrl(fields[this.idCol], fields[this.urlCol].trim());
    if ('ok' in base) return base;
    const item: ContentItem = { id: base.id, url: base.url };
    if (this.meta.length === 0) return { ok: true, item };
    const metadata: Record<string, Value> = {};
    for (const { col, name, type } of this.meta) {
      const raw = fields[col];
      if (raw === '') continue; // an empty cell is an absent field
      if (!type) {
        put(metadata, name, inferValue(raw));
        continue;
      }
      const c = convertValue(raw, type);
      if ('error' in c) return { ok: false, reason: `${name}: ${c.error}`, id: base.id };
      put(metadata, name, c.value);
    }
    // A CSV row is the whole item: its metadata replaces what the item had (interface §4 rule 2).
    item.metadata = metadata;
    return { ok: true, item };
  }
}
