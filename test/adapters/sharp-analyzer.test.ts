import sharp from 'sharp';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { ImageError } from '../../src/domain/processing';

const analyzer = new SharpImageAnalyzer();
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

describe('SharpImageAnalyzer', () => {
  it('reads size and format of jpeg and png', async () => {
    expect(await analyzer.analyze(await solid(30, 20).png().toBuffer())).toEqual({
      width: 30,
      height: 20,
      format: 'png',
    });
    expect(await analyzer.analyze(await solid(30, 20).jpeg().toBuffer())).toEqual({
      width: 30,
      height: 20,
      format: 'jpeg',
    });
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
});
