/** Vectors as BLOBs: float32, little-endian, as Float32Array lays them out on x86 and ARM. */
export function vectorBlob(v: number[] | Float32Array): Buffer {
  const f = v instanceof Float32Array ? v : Float32Array.from(v);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength);
}

export function blobVector(b: Buffer): Float32Array {
  // Copy: a Buffer's offset into its pool need not be 4-byte aligned.
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

/** Cosine similarity of unit vectors mapped to 0–1, as Elasticsearch scores `cosine` kNN. */
export const cosineScore = (dotProduct: number): number => (1 + dotProduct) / 2;
