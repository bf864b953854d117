/** Decoded pixels, RGB, row-major, `size`×`size` (the embedder's own input size). */
export interface Pixels {
  data: Uint8Array;
  size: number;
}

/**
 * Turns an image into a visual embedding. Vectors are L2-normalised, so cosine similarity is a
 * dot product, and `id` names the model and its version: vectors of different ids are never
 * compared.
 */
export interface Embedder {
  readonly id: string;
  readonly dimensions: number;
  /** The square input the embedder wants; the image decoder resizes to it. */
  readonly inputSize: number;
  embed(pixels: Pixels): Promise<Float32Array>;
  /** Lets go of a model and its thread, where there is one. */
  close?(): Promise<void>;
}
