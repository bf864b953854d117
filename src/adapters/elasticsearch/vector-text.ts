import { Serializer } from '@elastic/elasticsearch';

/**
 * A float32 as the shortest fixed-length text that reads back as the same float32: nine
 * significant digits always do (IEEE 754's round-trip bound for binary32). `JSON.stringify`
 * writes the double the float32 widened to, about 18 digits for the same value.
 */
const floatText = (x: number): string =>
  Number.isFinite(x) ? (Object.is(x, -0) ? '-0' : x.toPrecision(9)) : 'null';

/** A vector as a JSON array, nine digits a value (see floatText). */
export function vectorText(v: Float32Array): string {
  let s = '[';
  for (let i = 0; i < v.length; i++) s += (i ? ',' : '') + floatText(v[i]!);
  return `${s}]`;
}

/**
 * The client's serializer, with a document's top-level `Float32Array` values written as arrays
 * of float32 text (vectorText) instead of JSON.stringify's `{"0": …}` objects.
 *
 * An item's embedding is 1,420 floats. As doubles, parsing them was most of what Elasticsearch
 * spent indexing an item; float32 text makes the bulk line about a quarter shorter and the
 * node's CPU per item lower (docs/engines.md). Elasticsearch keeps a dense_vector as
 * float32, so the indexed vector is the same, bit for bit. Only top-level values are looked
 * at: that is where a document keeps its vector (ItemDoc); every other body is serialized as
 * before.
 */
export class VectorTextSerializer extends Serializer {
  override serialize(object: Record<string, unknown>): string {
    if (object === null || typeof object !== 'object' || Array.isArray(object))
      return super.serialize(object);
    let vectors: string | undefined;
    let rest: Record<string, unknown> | undefined;
    for (const k in object) {
      const v = object[k];
      if (!(v instanceof Float32Array)) continue;
      vectors = `${vectors === undefined ? '' : `${vectors},`}${JSON.stringify(k)}:${vectorText(v)}`;
      rest ??= { ...object };
      delete rest[k];
    }
    if (vectors === undefined) return super.serialize(object);
    const head = super.serialize(rest!);
    return head === '{}' ? `{${vectors}}` : `${head.slice(0, -1)},${vectors}}`;
  }
}
