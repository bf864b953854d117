/**
 * The copy signature (contract §18) in the report's rule: with the default embedder and its
 * default distance, an 80 % crop, a JPEG at quality 40 and a half-size copy of a photo are near
 * copies of it and other products of its category are not; a signature not written by
 * copySignature is not compared.
 */
import { createEmbedder } from '../../src/adapters/embedders';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { COPY_MATCH, CopyMatcher, copySignature } from '../../src/domain/copy-signature';
import { defaultMaxDistance, nearCopy } from '../../src/domain/duplicates';
import type { ImageFeatures } from '../../src/domain/processing';
import { photoVariants, productPhoto } from '../helpers/product-photos';

test('copies of a photo are near copies of it; other products of its category are not', async () => {
  // the default embedder, its default distance and the signatures: the report's whole rule
  const embedder = await createEmbedder('hybrid');
  const analyzer = new SharpImageAnalyzer(embedder);
  const maxDistance = defaultMaxDistance(embedder.id);
  const m = new CopyMatcher();
  const near = (a: ImageFeatures, b: ImageFeatures) => {
    const distance = 1 - a.vector.reduce((s, x, i) => s + x * b.vector[i]!, 0);
    const match = m.score(a.copySignature, b.copySignature);
    return nearCopy(
      { distance, ...(match !== undefined ? { match } : {}) },
      maxDistance,
      embedder.id,
    );
  };
  for (const category of ['bottle', 'bowl', 'bag'] as const) {
    const photo = await productPhoto(category, 1);
    const own = await analyzer.analyze(photo);
    expect(own.copySignature).toHaveLength(1536);
    for (const [name, copy] of Object.entries(await photoVariants(photo)))
      expect([category, name, near(own, await analyzer.analyze(copy))]).toEqual([
        category,
        name,
        true,
      ]);
    for (let seed = 2; seed <= 6; seed++) {
      const other = await analyzer.analyze(await productPhoto(category, seed));
      expect([category, seed, near(own, other)]).toEqual([category, seed, false]);
    }
  }
});

test('a picture matches itself exactly; a malformed or missing signature is no score', () => {
  const rgb = Uint8Array.from({ length: 64 * 64 * 3 }, (_, i) => (i * 37) % 256);
  const s = copySignature(rgb, 64);
  const m = new CopyMatcher();
  expect(m.score(s, s)).toBeCloseTo(1, 5);
  expect(m.score(s, 'not-a-signature')).toBeUndefined();
  expect(m.score(s, undefined)).toBeUndefined();
  // a flat picture has no layout to correlate: never a copy of anything
  const flat = copySignature(new Uint8Array(64 * 64 * 3).fill(200), 64);
  expect(m.score(flat, s)! < COPY_MATCH).toBe(true);
});
