import type { ImageFeatures } from '../domain/processing';

/** Decodes image bytes (format from the bytes) into features; failures are `ImageError`s. */
export interface ImageAnalyzer {
  analyze(bytes: Uint8Array): Promise<ImageFeatures>;
  /**
   * The vectors a lens query is searched with (L2-normalised, the first one as `analyze` makes
   * it): an item's score is its best over them.
   */
  queryVectors(bytes: Uint8Array): Promise<number[][]>;
}
