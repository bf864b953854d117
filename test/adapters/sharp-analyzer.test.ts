import sharp from 'sharp';
import { DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
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
});
