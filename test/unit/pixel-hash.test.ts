import sharp from 'sharp';
import { DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { scene } from '../helpers/test-scene';

// Contract §18, exact duplicates: the same picture has one hash whatever file carries it, and
// the variants that make near duplicates (a crop, a resize, a lossy recompression) do not share it.
const analyzer = new SharpImageAnalyzer(new DescriptorEmbedder());
const hashOf = async (bytes: Buffer) => (await analyzer.analyze(bytes)).pixelHash;

test('the same pixels in different files share a hash; variants and other pictures do not', async () => {
  const png = await scene().png().toBuffer();
  const { width = 0, height = 0 } = await sharp(png).metadata();
  const h = await hashOf(png);
  expect(h).toMatch(/^[A-Za-z0-9_-]{32}$/);
  // the same bytes again, and the same pixels re-saved with other compression and metadata
  expect(await hashOf(Buffer.from(png))).toBe(h);
  const resaved = await sharp(png).png({ compressionLevel: 1 }).withMetadata().toBuffer();
  expect(resaved.equals(png)).toBe(false);
  expect(await hashOf(resaved)).toBe(h);
  const variants = [
    await sharp(png).jpeg({ quality: 40 }).toBuffer(),
    await sharp(png)
      .extract({
        left: 0,
        top: 0,
        width: Math.round(width * 0.8),
        height: Math.round(height * 0.8),
      })
      .toBuffer(),
    await sharp(png)
      .resize(Math.round(width / 2))
      .toBuffer(),
    await sharp(png).negate({ alpha: false }).toBuffer(),
  ];
  const hashes = await Promise.all(variants.map(hashOf));
  expect(new Set([h, ...hashes]).size).toBe(1 + variants.length);
});
