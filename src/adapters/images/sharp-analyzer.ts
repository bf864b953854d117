import { copySignature } from '../../domain/copy-signature';
import crypto from 'node:crypto';
import sharp, { type Metadata } from 'sharp';
import { LIMITS } from '../../domain/limits';
import { ImageError, type ImageFeatures } from '../../domain/processing';
import type { Embedder, Pixels } from '../../ports/embedder';
import type { ImageAnalyzer } from '../../ports/image-analyzer';
import { DecodeBudget, dcFootprint, decodeFootprint } from './decode-budget';
import { decodeJpegDc } from './jpeg-dc';
import { rawTiff } from './raw-tiff';

// libvips settings are process-wide; this module is the service's only sharp user.
// No operation cache: each image is decoded once, so it never hits, and a cached JPEG load keeps
// libjpeg's decoder alive, with all the DCT coefficients of a progressive image (measured: four
// 40 MP progressive CMYK decodes in a row left 1.2 GB resident with the cache, 13 MB without).
sharp.cache(false);
// One libvips thread per pipeline: libjpeg decodes serially anyway, and each extra thread brings
// its own buffers; decodes run side by side instead (libuv's pool, within the budget). sharp
// picks 1 itself only on glibc without jemalloc or MALLOC_ARENA_MAX; pinned so that a deployment
// setting either does not multiply buffers.
sharp.concurrency(1);

/**
 * One per process, so worker jobs and lens requests share it whatever builds the analyzers:
 * LIMITS.decodeBudgetBytes of decodes in flight. The goal is 300 MB (286 MiB) above
 * idle; the rest is left for request bodies, JSON and the V8 heap. A single decode above it is
 * refused with `too_large` (see tooCostly). The bound holds only if freed
 * decoder memory goes back to the system: glibc's adaptive thresholds keep blocks of up to
 * 32 MiB in per-thread arenas, a few hundred MiB more under hostile images, unless the process
 * starts with MALLOC_TRIM_THRESHOLD_ set (docs/engines.md).
 */
const processDecodeBudget = new DecodeBudget(LIMITS.decodeBudgetBytes);

const mib = (bytes: number): number => Math.ceil(bytes / 2 ** 20);

/**
 * A decode that alone needs more than the whole budget is refused, not run alone: it would
 * take the process past the memory goal by itself, whatever else waits. Since progressive
 * JPEGs are read from their DC scans, only an interlaced PNG of tens of megapixels (decoded
 * whole before its first row) gets here; it is within the pixel limit, so the message says why.
 */
function tooCostly(weight: number, capacity: number): ImageError {
  return new ImageError(
    'too_large',
    `decoding this image needs about ${mib(weight)} MiB at once (an interlaced PNG is decoded whole before its first row); at most ${mib(capacity)} MiB per image: a non-interlaced PNG, a JPEG or fewer pixels decode within it`,
  );
}

/**
 * A progressive JPEG is read from its DC scans alone (jpeg-dc.ts) when libjpeg would decode it
 * at 1/8 scale anyway (both sides at least 8 × the embedder's input: shrink-on-load then uses
 * the DC coefficients and nothing else, so the samples are the same), or when its full
 * decode would not fit the budget at all. Either way it costs a few MiB instead of every
 * coefficient of the image.
 */
function readsDcOnly(meta: Metadata, inputSize: number, overBudget: boolean): boolean {
  if (meta.format !== 'jpeg' || !meta.isProgressive) return false;
  return overBudget || Math.min(meta.width ?? 0, meta.height ?? 0) >= 8 * inputSize;
}

/** The DC samples as a TIFF carrying the original's colour profile and orientation. */
async function dcTiff(bytes: Uint8Array, meta: Metadata): Promise<Buffer> {
  const image = await decodeJpegDc(bytes);
  return rawTiff(image, { icc: meta.icc, orientation: meta.orientation });
}

/**
 * The picture's name for exact duplicates: its size as displayed and the pixels decoded for the
 * embedder (upright, sRGB, at the embedder's input size), so the same file under any url, or a
 * copy re-saved without changing a pixel, has the same hash, and a crop, a resize or a lossy
 * recompression does not. The full-size pixels are never decoded for it (the decode budget).
 */
function pixelHash(width: number, height: number, pixels: Pixels): string {
  return crypto
    .createHash('sha256')
    .update(`p1:${width}x${height}:${pixels.size}:`)
    .update(pixels.data)
    .digest('base64url')
    .slice(0, 32);
}

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
  constructor(
    private readonly embedder: Embedder,
    private readonly budget: DecodeBudget = processDecodeBudget,
  ) {}

  async analyze(bytes: Uint8Array): Promise<ImageFeatures> {
    const { width, height, format, pixels } = await this.decode(bytes);
    const vector = await this.embedder.embed(pixels);
    return {
      width,
      height,
      format,
      vector: Array.from(vector),
      embedder: this.embedder.id,
      pixelHash: pixelHash(width, height, pixels),
      copySignature: copySignature(pixels.data, pixels.size),
    };
  }

  /**
   * A lens query's vectors: the photo as decoded, then the same decode turned LENS_TURNS_DEG
   * each way (the centre kept at the same size), for a shopper's photo taken a little askew.
   * Turning the small decode costs a model run each, not another decode.
   */
  async queryVectors(bytes: Uint8Array): Promise<number[][]> {
    const { pixels } = await this.decode(bytes);
    const views = [
      pixels,
      ...(await Promise.all(LENS_TURNS_DEG.map((deg) => turned(pixels, deg)))),
    ];
    const out: number[][] = [];
    for (const v of views) out.push(Array.from(await this.embedder.embed(v)));
    return out;
  }

  private async decode(
    bytes: Uint8Array,
  ): Promise<{ width: number; height: number; format: 'jpeg' | 'png'; pixels: Pixels }> {
    const format = sniffFormat(bytes);
    if (format !== 'jpeg' && format !== 'png')
      throw new ImageError(
        'unsupported_format',
        `image data is ${format}; only jpeg and png are accepted`,
      );
    let meta: Metadata;
    try {
      meta = await sharp(bytes, { limitInputPixels: false }).metadata();
    } catch (e) {
      throw new ImageError('invalid_image', `image cannot be read: ${(e as Error).message}`);
    }
    let width = meta.width ?? 0;
    let height = meta.height ?? 0;
    // EXIF orientations 5–8 rotate by 90°: report the size as displayed.
    if ((meta.orientation ?? 1) >= 5) [width, height] = [height, width];
    if (width * height > LIMITS.imageMaxPixels)
      throw new ImageError(
        'too_large',
        `image is ${width}×${height} (${((width * height) / 1e6).toFixed(1)} MP); at most ${LIMITS.imageMaxPixels / 1e6} MP`,
      );
    const size = this.embedder.inputSize;
    const full = decodeFootprint(meta);
    const dc = readsDcOnly(meta, size, full > this.budget.capacity);
    const weight = dc ? dcFootprint(meta) : full;
    if (weight > this.budget.capacity) throw tooCostly(weight, this.budget.capacity);
    let pixels: Buffer;
    try {
      // Decoding the embedder's input proves the whole stream decodes (truncated files fail
      // here). Upright as displayed, transparency on white, sRGB. Keep extract, trim, rotation
      // by an angle and pipelineColourspace out of this pipeline: each turns off JPEG
      // shrink-on-load, and a baseline 40 MP JPEG, now decoded at 1/8 scale in 7 MiB, would be
      // decoded at full size (measured: 13 times slower, 168 MiB with a rotation).
      pixels = await this.budget.run(weight, async () =>
        sharp(dc ? await dcTiff(bytes, meta) : bytes, {
          failOn: 'error',
          limitInputPixels: LIMITS.imageMaxPixels,
          pages: 1,
          sequentialRead: true,
        })
          .rotate()
          .flatten({ background: '#ffffff' })
          .toColourspace('srgb')
          .resize(size, size, { fit: 'fill', fastShrinkOnLoad: true })
          .removeAlpha()
          .raw()
          .toBuffer(),
      );
    } catch (e) {
      throw new ImageError('invalid_image', `image cannot be decoded: ${(e as Error).message}`);
    }
    return { width, height, format, pixels: { data: pixels, size } };
  }
}

/**
 * Lens query turns, in degrees: of the extra views tried on turned food photos, ±8 lifted photos
 * turned 10° either way most evenly, and cropped copies too, without losing mirrored or
 * recompressed ones (docs/embedders.md, "hybrid").
 */
const LENS_TURNS_DEG = [-8, 8];

/** The decode turned on white, its centre cut back to the embedder's square. */
async function turned(p: Pixels, deg: number): Promise<Pixels> {
  const raw = { width: p.size, height: p.size, channels: 3 as const };
  const { data, info } = await sharp(p.data, { raw })
    .rotate(deg, { background: '#ffffff' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const centre = await sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } })
    .extract({
      left: Math.floor((info.width - p.size) / 2),
      top: Math.floor((info.height - p.size) / 2),
      width: p.size,
      height: p.size,
    })
    .raw()
    .toBuffer();
  return { data: centre, size: p.size };
}
