import { LIMITS } from './limits';
/** Processing error codes of contract §4. */
export type ProcessingErrorCode =
  | 'download_failed'
  | 'not_found'
  | 'too_large'
  | 'unsupported_format'
  | 'invalid_image'
  | 'forbidden_address'
  | 'timeout'
  | 'quota_postponed';

/** Why an image could not become features. `transient` failures are retried with backoff. */
export class ImageError extends Error {
  constructor(
    readonly code: ProcessingErrorCode,
    message: string,
    readonly transient = false,
  ) {
    super(message);
    this.name = 'ImageError';
  }
}

export interface ImageFeatures {
  width: number;
  height: number;
  format: 'jpeg' | 'png';
  /** The visual embedding (L2-normalised) and the embedder that made it. */
  vector: number[];
  embedder: string;
  /**
   * Names the decoded picture (contract §18, exact duplicates): equal for the same picture
   * whatever its id, url or file name, different for any other pixels or size. The image
   * analyzer always sets it; features made by hand (tests, seeded items) may not.
   */
  pixelHash?: string;
  /** The picture's layout for telling copies from similar photos (domain/copy-signature.ts). */
  copySignature?: string;
}

export interface ProcessingFailure {
  code: ProcessingErrorCode;
  message: string;
  attempts: number;
}

/** Transient failures are tried this many times in all before they are recorded. */
export const MAX_ATTEMPTS = LIMITS.imageAttempts;
