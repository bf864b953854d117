const isObject = (v: unknown): v is object =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Content inputs as REST's JSON body carries them, for the same domain validation. Not a JSON
 * round trip: metadata nested thousands deep overflowed the stack in JSON.stringify (a 500)
 * before the domain rule (values are scalars or flat arrays, no objects) could refuse it by field.
 * One level is copied, which is all that rule lets through; it also gives JSON scalars written
 * inline, which graphql-js builds with a null prototype, an ordinary one.
 */
export function contentBody(
  items: readonly object[],
  opts: { dropNulls: boolean },
): Array<Record<string, unknown>> {
  return items.map((item) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(item)) {
      if (v === undefined || (opts.dropNulls && v === null)) continue;
      out[k] = isObject(v) ? { ...v } : v;
    }
    return out;
  });
}
