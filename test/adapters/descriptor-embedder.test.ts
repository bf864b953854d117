import sharp from 'sharp';
import { DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';

const e = new DescriptorEmbedder();
const size = e.inputSize;

async function pixels(svg: string): Promise<Uint8Array> {
  return sharp(Buffer.from(svg)).resize(size, size, { fit: 'fill' }).removeAlpha().raw().toBuffer();
}
const shape = (body: string, bg = 'white') =>
  `<svg width="200" height="200"><rect width="100%" height="100%" fill="${bg}"/>${body}</svg>`;
const cos = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i]!, 0);

test('vectors are deterministic, unit length and of the declared size', async () => {
  const p = await pixels(shape('<circle cx="100" cy="100" r="60" fill="red"/>'));
  const a = await e.embed({ data: p, size });
  const b = await e.embed({ data: p, size });
  expect(a).toHaveLength(e.dimensions);
  expect(Array.from(a)).toEqual(Array.from(b));
  expect(Math.hypot(...a)).toBeCloseTo(1, 5);
});

test('a shifted, resized copy is nearer than another shape or another colour', async () => {
  const v = async (svg: string) => e.embed({ data: await pixels(svg), size });
  const redCircle = await v(shape('<circle cx="100" cy="100" r="60" fill="red"/>'));
  const movedRedCircle = await v(shape('<circle cx="80" cy="110" r="50" fill="#e01010"/>'));
  const redSquare = await v(shape('<rect x="40" y="40" width="120" height="120" fill="red"/>'));
  const blueCircle = await v(shape('<circle cx="100" cy="100" r="60" fill="blue"/>'));
  const near = cos(redCircle, movedRedCircle);
  expect(near).toBeGreaterThan(cos(redCircle, redSquare));
  expect(near).toBeGreaterThan(cos(redCircle, blueCircle));
});
