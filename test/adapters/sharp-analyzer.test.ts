import sharp from 'sharp';
import { DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';
import { DecodeBudget, decodeFootprint } from '../../src/adapters/images/decode-budget';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { LIMITS } from '../../src/domain/limits';
import { ImageError } from '../../src/domain/processing';

const analyzer = new SharpImageAnalyzer(new DescriptorEmbedder());
const failure = async (bytes: Uint8Array): Promise<ImageError> => {
  try {
    await analyzer.analyze(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(ImageError);
    return e as ImageError;
  }
  throw new Error('expected a failure');
};
const solid = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#336699' } });
/** Made CMYK at 8×8 and enlarged in CMYK: converting megapixels to CMYK takes seconds. */
const progressiveCmyk = async (width: number, height: number) =>
  sharp(await solid(8, 8).toColourspace('cmyk').jpeg().toBuffer())
    .pipelineColourspace('cmyk')
    .resize(width, height, { kernel: 'nearest' })
    .toColourspace('cmyk')
    .jpeg({ progressive: true, quality: 80 })
    .toBuffer();
const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

/** Records the most bytes and decodes the budget let in at once. */
class WatchedBudget extends DecodeBudget {
  peakBytes = 0;
  peakRunning = 0;
  private active = 0;

  override run<T>(weight: number, task: () => Promise<T>): Promise<T> {
    return super.run(weight, async () => {
      this.active += 1;
      this.peakRunning = Math.max(this.peakRunning, this.active);
      this.peakBytes = Math.max(this.peakBytes, this.inUse);
      try {
        return await task();
      } finally {
        this.active -= 1;
      }
    });
  }
}

describe('SharpImageAnalyzer', () => {
  it('reads size and format of jpeg and png, and embeds the picture', async () => {
    const png = await analyzer.analyze(await solid(30, 20).png().toBuffer());
    expect(png).toMatchObject({ width: 30, height: 20, format: 'png', embedder: 'descriptor-v1' });
    const jpeg = await analyzer.analyze(await solid(30, 20).jpeg().toBuffer());
    expect(jpeg).toMatchObject({ width: 30, height: 20, format: 'jpeg' });
    expect(png.vector).toHaveLength(new DescriptorEmbedder().dimensions);
    // the same picture in either format embeds (almost) the same
    expect(png.vector.reduce((s, x, i) => s + x * jpeg.vector[i]!, 0)).toBeGreaterThan(0.99);
  });

  it('embeds a transparent png as if on white', async () => {
    const clear = await sharp({
      create: { width: 16, height: 16, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } },
    })
      .png()
      .toBuffer();
    const white = await sharp({
      create: { width: 16, height: 16, channels: 3, background: '#ffffff' },
    })
      .png()
      .toBuffer();
    const a = (await analyzer.analyze(clear)).vector;
    const b = (await analyzer.analyze(white)).vector;
    expect(a.reduce((s, x, i) => s + x * b[i]!, 0)).toBeCloseTo(1, 5);
  });

  it('reports the displayed size of an EXIF-rotated jpeg', async () => {
    const rotated = await solid(30, 20).jpeg().withMetadata({ orientation: 6 }).toBuffer();
    expect(await analyzer.analyze(rotated)).toMatchObject({ width: 20, height: 30 });
  });

  it('refuses images above 40 megapixels before decoding them', async () => {
    const huge = await solid(8000, 5001).png({ compressionLevel: 9 }).toBuffer();
    const e = await failure(huge);
    expect(e.code).toBe('too_large');
    expect(e.message).toContain('40.0 MP');
    expect(e.transient).toBe(false);
  });

  it('refuses other formats by their bytes, and undecodable data', async () => {
    expect((await failure(await solid(8, 8).webp().toBuffer())).code).toBe('unsupported_format');
    expect((await failure(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'))).code).toBe(
      'unsupported_format',
    );
    const png = await solid(300, 300).png().toBuffer();
    expect((await failure(png.subarray(0, 60))).code).toBe('invalid_image');
  });

  it('keeps the original size of a large progressive CMYK jpeg and embeds its colour', async () => {
    const big = await progressiveCmyk(4000, 3000);
    expect(big.length).toBeLessThan(500 * 1024);
    const features = await analyzer.analyze(big);
    expect(features).toMatchObject({ width: 4000, height: 3000, format: 'jpeg' });
    const small = await analyzer.analyze(await progressiveCmyk(40, 30));
    expect(dot(features.vector, small.vector)).toBeGreaterThan(0.99);
  });

  it('holds the decodes it runs at once within the budget', async () => {
    // small enough to be decoded whole (a side under 8 × the embedder's input)
    const jpeg = await progressiveCmyk(500, 400);
    const weight = decodeFootprint(await sharp(jpeg).metadata());
    const budget = new WatchedBudget(weight * 2.5);
    const shared = new SharpImageAnalyzer(new DescriptorEmbedder(), budget);
    const all = await Promise.all(Array.from({ length: 6 }, () => shared.analyze(jpeg)));
    expect(all.map((f) => f.width)).toEqual(Array(6).fill(500));
    expect(budget.peakBytes).toBeGreaterThanOrEqual(weight);
    expect(budget.peakBytes).toBeLessThanOrEqual(weight * 2.5);
    expect(budget.peakRunning).toBeLessThanOrEqual(2);
    expect(budget.inUse).toBe(0);
  });

  it('searches a lens photo as decoded and turned a little each way', async () => {
    // a scene with colour, layout and edges in every quarter, so a turn changes the descriptor
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="300" height="300">
      <rect width="300" height="300" fill="#f4f0e6"/>
      <rect x="30" y="40" width="110" height="60" fill="#c0392b"/>
      <circle cx="210" cy="90" r="45" fill="#2e86c1"/>
      <rect x="60" y="170" width="40" height="110" fill="#27ae60"/>
      <polygon points="170,280 280,280 225,170" fill="#8e44ad"/></svg>`;
    const photo = await sharp(Buffer.from(svg)).jpeg({ quality: 92 }).toBuffer();
    const askew = await sharp(photo).rotate(8, { background: '#ffffff' }).jpeg().toBuffer();
    const original = (await analyzer.analyze(photo)).vector;
    const views = await analyzer.queryVectors(askew);
    expect(views).toHaveLength(3);
    expect(views[0]).toEqual((await analyzer.analyze(askew)).vector);
    for (const v of views) expect(dot(v, v)).toBeCloseTo(1, 5);
    // the view turned back (−8°) is nearer the original than the photo as taken or turned on
    const [plain, back, further] = views.map((v) => dot(v, original));
    expect(back).toBeGreaterThan(plain!);
    expect(back).toBeGreaterThan(further!);
  });

  it('reads a progressive jpeg too costly to decode whole from its DC scans, in a few MiB', async () => {
    const jpeg = await progressiveCmyk(1000, 800);
    const weight = decodeFootprint(await sharp(jpeg).metadata());
    const tight = new WatchedBudget(weight - 1);
    const dcOnly = await new SharpImageAnalyzer(new DescriptorEmbedder(), tight).analyze(jpeg);
    expect(dcOnly).toMatchObject({ width: 1000, height: 800 });
    expect(tight.peakBytes).toBeLessThan(weight / 2);
    // the same picture as the whole decode sees it
    const whole = await new SharpImageAnalyzer(new DescriptorEmbedder(), new WatchedBudget(weight));
    expect(dot(dcOnly.vector, (await whole.analyze(jpeg)).vector)).toBeGreaterThan(0.99);
  });

  it('reads a 40 MP progressive CMYK jpeg within the budget, as it would at 1/8 scale', async () => {
    const budget = new WatchedBudget(LIMITS.decodeBudgetBytes);
    const big = await progressiveCmyk(6300, 6300);
    const features = await new SharpImageAnalyzer(new DescriptorEmbedder(), budget).analyze(big);
    expect(features).toMatchObject({ width: 6300, height: 6300, format: 'jpeg' });
    // libjpeg alone would hold 6300 × 6300 × 4 coefficients of 2 bytes: 303 MiB
    expect(budget.peakBytes).toBeLessThan(32 * 2 ** 20);
    const small = await analyzer.analyze(await progressiveCmyk(40, 40));
    expect(dot(features.vector, small.vector)).toBeGreaterThan(0.99);
  });

  it('refuses an image whose decode alone needs more than the whole budget, and says why', async () => {
    // an interlaced (Adam7) PNG is decoded whole before its first row exists
    const png = await solid(1000, 800).png({ progressive: true }).toBuffer();
    const weight = decodeFootprint(await sharp(png).metadata());
    const tight = new WatchedBudget(weight - 1);
    const refusing = new SharpImageAnalyzer(new DescriptorEmbedder(), tight);
    const e = (await refusing.analyze(png).catch((x: unknown) => x)) as ImageError;
    expect(e.code).toBe('too_large');
    expect(e.message).toMatch(/needs about \d+ MiB .*interlaced.*at most \d+ MiB per image/);
    expect(tight.peakRunning).toBe(0);
    // the same image fits a budget of its own size
    const exact = new SharpImageAnalyzer(new DescriptorEmbedder(), new WatchedBudget(weight));
    expect((await exact.analyze(png)).width).toBe(1000);
  });
});

describe('decodeFootprint', () => {
  const MiB = 2 ** 20;
  it('weighs a progressive jpeg by all its coefficients, a streamed image by a strip', async () => {
    const header = await sharp(await progressiveCmyk(630, 630)).metadata();
    expect(decodeFootprint(header)).toBe(4 * MiB + 630 * 630 * 2 * 4);
    const at = (h: object) => decodeFootprint({ width: 6300, height: 6300, ...h });
    const px = 6300 * 6300;
    const jpeg = { format: 'jpeg', channels: 3, isProgressive: true };
    expect(at({ ...jpeg, chromaSubsampling: '4:2:0' })).toBe(4 * MiB + px * 2 * 1.5);
    expect(at({ ...jpeg, chromaSubsampling: '4:4:4' })).toBe(4 * MiB + px * 2 * 3);
    expect(at({ ...jpeg, channels: 1 })).toBe(4 * MiB + px * 2);
    expect(at({ ...jpeg, isProgressive: false })).toBe(4 * MiB + (px * 3) / 8);
    const png = { format: 'png', channels: 4, depth: 'ushort' };
    expect(at({ ...png, isProgressive: true })).toBe(4 * MiB + px * 8);
    expect(at({ ...png, isProgressive: false })).toBe(4 * MiB + px);
  });
});

describe('DecodeBudget', () => {
  const settle = () => new Promise((r) => setImmediate(r));

  it('admits by weight, first come first served, and runs a task above the budget alone', async () => {
    const budget = new DecodeBudget(10);
    const started: string[] = [];
    const finish = new Map<string, () => void>();
    const task = (name: string, weight: number) =>
      budget.run(weight, async () => {
        started.push(name);
        await new Promise<void>((r) => finish.set(name, r));
      });
    const a = task('a', 4);
    const b = task('b', 4);
    const c = task('c', 12);
    const d = task('d', 1);
    await settle();
    // d would fit, but waits behind c: a stream of small images never starves a large one
    expect(started).toEqual(['a', 'b']);
    expect(budget.inUse).toBe(8);
    finish.get('a')!();
    await a;
    await settle();
    expect(started).toEqual(['a', 'b']);
    finish.get('b')!();
    await b;
    await settle();
    expect(started).toEqual(['a', 'b', 'c']);
    expect(budget.inUse).toBe(12);
    finish.get('c')!();
    await c;
    await settle();
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    finish.get('d')!();
    await d;
    expect(budget.inUse).toBe(0);
  });

  it('gives back the weight of a task that fails', async () => {
    const budget = new DecodeBudget(10);
    await expect(budget.run(6, () => Promise.reject(new Error('bad')))).rejects.toThrow('bad');
    expect(budget.inUse).toBe(0);
    await expect(budget.run(10, () => Promise.resolve('ok'))).resolves.toBe('ok');
  });
});
