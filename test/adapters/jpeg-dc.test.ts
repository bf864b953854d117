import fc from 'fast-check';
import fs from 'node:fs';
import path from 'node:path';
import sharp, { type Sharp } from 'sharp';
import { DcUnsupported, decodeJpegDc, type DcImage } from '../../src/adapters/images/jpeg-dc';
import { rawTiff } from '../../src/adapters/images/raw-tiff';
import { scene } from '../helpers/test-scene';

const FIXTURES = path.join(__dirname, '../fixtures/jpeg');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name));

/**
 * The mean of each 8 × 8 block of sharp's own full decode, in the decoder's colour space
 * (CMYK kept as CMYK), against the DC image: the mean absolute difference per sample.
 */
async function differenceFromFullDecode(jpeg: Buffer, dc: DcImage): Promise<number> {
  const full = await (
    dc.channels === 4
      ? sharp(jpeg).pipelineColourspace('cmyk').toColourspace('cmyk')
      : dc.channels === 1
        ? sharp(jpeg).toColourspace('b-w')
        : sharp(jpeg)
  )
    .raw()
    .toBuffer({ resolveWithObject: true });
  const { width: w, height: h, channels: ch } = full.info;
  expect(ch).toBe(dc.channels);
  expect([dc.width, dc.height]).toEqual([Math.ceil(w / 8), Math.ceil(h / 8)]);
  let sum = 0;
  for (let by = 0; by < dc.height; by++)
    for (let bx = 0; bx < dc.width; bx++)
      for (let c = 0; c < ch; c++) {
        let s = 0;
        let n = 0;
        for (let y = by * 8; y < Math.min(h, by * 8 + 8); y++)
          for (let x = bx * 8; x < Math.min(w, bx * 8 + 8); x++, n++)
            s += full.data[(y * w + x) * ch + c]!;
        sum += Math.abs(s / n - dc.data[(by * dc.width + bx) * ch + c]!);
      }
  return sum / dc.data.length;
}

describe('decodeJpegDc', () => {
  // A block's mean is its DC coefficient exactly; only rounding and clamping of the full
  // decode differ. A subsampled chroma block covers 2 × 2 blocks, so its edges differ more.
  it.each([
    ['cmyk-restart.jpg', 4, 1],
    ['ycck-restart.jpg', 4, 1],
    ['ycc420-restart.jpg', 3, 6],
    ['ycc422.jpg', 3, 6],
  ])(
    'reads %s (restart intervals, Adobe CMYK and YCCK, subsampled chroma)',
    async (name, ch, tolerance) => {
      const jpeg = fixture(name);
      const dc = await decodeJpegDc(jpeg);
      expect(dc.channels).toBe(ch);
      expect(await differenceFromFullDecode(jpeg, dc)).toBeLessThan(tolerance);
    },
  );

  it.each([
    ['grey', (s: Sharp) => s.toColourspace('b-w').jpeg({ progressive: true }), 1, 1],
    ['RGB 4:4:4', (s: Sharp) => s.jpeg({ progressive: true, chromaSubsampling: '4:4:4' }), 3, 1],
    ['RGB 4:2:0', (s: Sharp) => s.jpeg({ progressive: true, chromaSubsampling: '4:2:0' }), 3, 6],
    ['CMYK', (s: Sharp) => s.toColourspace('cmyk').jpeg({ progressive: true }), 4, 1],
  ])('reads a progressive %s jpeg as sharp writes it', async (_, encode, ch, tolerance) => {
    const jpeg = await encode(scene()).toBuffer();
    const dc = await decodeJpegDc(jpeg);
    expect(dc.channels).toBe(ch);
    expect(await differenceFromFullDecode(jpeg, dc)).toBeLessThan(tolerance);
  });

  it('leaves baseline jpegs to sharp, and refuses what is not a jpeg', async () => {
    await expect(decodeJpegDc(await scene().jpeg().toBuffer())).rejects.toBeInstanceOf(
      DcUnsupported,
    );
    const png = await scene().png().toBuffer();
    await expect(decodeJpegDc(png)).rejects.toThrow('not a JPEG');
  });

  it('refuses a file cut short anywhere, since its last scans are missing', async () => {
    const jpeg = fixture('ycc420-restart.jpg');
    for (const cut of [2, 20, 300, 700, Math.floor(jpeg.length / 2), jpeg.length - 2])
      await expect(decodeJpegDc(jpeg.subarray(0, cut))).rejects.toThrow(Error);
  });

  it('answers any corruption with an answer or an Error, never a hang or a crash', async () => {
    const base = fixture('cmyk-restart.jpg');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 })), {
          minLength: 1,
          maxLength: 8,
        }),
        async (edits) => {
          const bytes = Buffer.from(base);
          for (const [at, value] of edits) bytes[at] = value;
          try {
            const dc = await decodeJpegDc(bytes);
            expect(dc.data.length).toBe(dc.width * dc.height * dc.channels);
          } catch (e) {
            expect(e).toBeInstanceOf(Error);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reads a 40 MP progressive CMYK jpeg in a few MiB, giving the event loop turns', async () => {
    const jpeg = await sharp(await scene().toColourspace('cmyk').jpeg().toBuffer())
      .pipelineColourspace('cmyk')
      .resize(6300, 6300, { kernel: 'nearest' })
      .toColourspace('cmyk')
      .jpeg({ progressive: true, quality: 80 })
      .toBuffer();
    let turns = 0;
    const ticker = setInterval(() => turns++, 1);
    const dc = await decodeJpegDc(jpeg).finally(() => clearInterval(ticker));
    expect([dc.width, dc.height, dc.channels]).toEqual([788, 788, 4]);
    expect(turns).toBeGreaterThan(0);
  });
});

describe('rawTiff', () => {
  it('hands sharp CMYK samples with their orientation and colour profile', async () => {
    const cmyk = { width: 3, height: 2, channels: 4 as const, data: new Uint8Array(24).fill(0) };
    cmyk.data.set([0, 0, 0, 255], 0); // black ink at the top left
    const cmykJpeg = await scene().toColourspace('cmyk').jpeg().withIccProfile('cmyk').toBuffer();
    const profile = (await sharp(cmykJpeg).metadata()).icc!;
    const tiff = rawTiff(cmyk, { orientation: 6, icc: profile });
    const meta = await sharp(tiff).metadata();
    expect(meta).toMatchObject({ space: 'cmyk', channels: 4, orientation: 6, width: 3 });
    expect(meta.icc?.equals(profile)).toBe(true);
    const rgb = await sharp(tiff).rotate().toColourspace('srgb').raw().toBuffer({
      resolveWithObject: true,
    });
    // turned upright (orientation 6: a quarter turn clockwise), the black pixel is top right
    expect([rgb.info.width, rgb.info.height]).toEqual([2, 3]);
    expect(rgb.data[3]! + rgb.data[4]! + rgb.data[5]!).toBeLessThan(120);
    expect(rgb.data[0]! + rgb.data[1]! + rgb.data[2]!).toBeGreaterThan(600);
  });
});
