import sharp from 'sharp';
import { ImageError, type ImageFeatures } from '../../domain/processing';
import type { Embedder } from '../../ports/embedder';
import type { ImageAnalyzer } from '../../ports/image-analyzer';

export const MAX_PIXELS = 40_000_000;

/** The format is decided from the bytes, never from the URL or Content-Type. */
export function sniffFormat(b: Uint8Array): 'jpeg' | 'png' | string {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((x, i) => b[i] === x))
    return 'png';
  const ascii = Buffer.from(b.subarray(0, 12)).toString('latin1');
  if (ascii.startsWith('GIF8')) return 'gif';
  if (ascii.startsWith('RIFF') && ascii.slice(8, 12) === 'WEBP') return 'webp';
  if (ascii.startsWith('BM')) return 'bmp';
  if (/^\s*</.test(ascii)) return 'html or svg';
  return 'unknown';
}

export class SharpImageAnalyzer implements ImageAnalyzer {
  constructor(private readonly embedder: Embedder) {}

  async analyze(bytes: Uint8Array): Promise<ImageFeatures> {
    const format = sniffFormat(bytes);
    if (format !== 'jpeg' && format !== 'png')
      throw new ImageError(
        'unsupported_format',
        `image data is ${format}; only jpeg and png are accepted`,
      );
    let width: number;
    let height: number;
    try {
      const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
      width = meta.width ?? 0;
      height = meta.height ?? 0;
      // EXIF orientations 5–8 rotate by 90°: report the size as displayed.
      if ((meta.orientation ?? 1) >= 5) [width, height] = [height, width];
    } catch (e) {
      throw new ImageError('invalid_image', `image cannot be read: ${(e as Error).message}`);
    }
    if (width * height > MAX_PIXELS)
      throw new ImageError(
        'too_large',
        `image is ${width}×${height} (${((width * height) / 1e6).toFixed(1)} MP); at most ${MAX_PIXELS / 1e6} MP`,
      );
    let pixels: Buffer;
    const size = this.embedder.inputSize;
    try {
      // Decoding the embedder's input proves the whole stream decodes (truncated files fail
      // here). Upright as displayed, transparency on white, sRGB.
      pixels = await sharp(bytes, { failOn: 'error', limitInputPixels: MAX_PIXELS, pages: 1 })
        .rotate()
        .flatten({ background: '#ffffff' })
        .toColourspace('srgb')
        .resize(size, size, { fit: 'fill' })
        .removeAlpha()
        .raw()
        .toBuffer();
    } catch (e) {
      throw new ImageError('invalid_image', `image cannot be decoded: ${(e as Error).message}`);
    }
    const vector = await this.embedder.embed({ data: pixels, size });
    return { width, height, format, vector: Array.from(vector), embedder: this.embedder.id };
  }
}
