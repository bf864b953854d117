import sharp, { type Sharp } from 'sharp';

/**
 * A scene with gradients and hard edges, 203 × 117 (no side a multiple of 8 or 16), for the JPEG
 * DC reader's tests and the fuzzer's seeds.
 */
export const scene = (): Sharp =>
  sharp(
    Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="203" height="117">
      <defs><linearGradient id="g"><stop offset="0" stop-color="#c33"/><stop offset="1" stop-color="#3a9"/></linearGradient></defs>
      <rect width="203" height="117" fill="url(#g)"/><circle cx="70" cy="60" r="40" fill="#fd4"/>
      <rect x="120" y="20" width="60" height="70" fill="#236"/></svg>`),
  ).flatten({ background: '#ffffff' });
