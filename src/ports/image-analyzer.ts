import type { ImageFeatures } from '../domain/processing';

/** Decodes image bytes (format from the bytes) into features; failures are `ImageError`s. */
export interface ImageAnalyzer {
  analyze(bytes: Uint8Array): Promise<ImageFeatures>;
}
