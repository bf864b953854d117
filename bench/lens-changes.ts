import sharp from 'sharp';

/** A photo turned `deg` on white, as a shopper's photo taken a little askew. */
const rotatedBy =
  (deg: number) =>
  (b: Buffer): Promise<Buffer> =>
    sharp(b).rotate(deg, { background: '#ffffff' }).jpeg({ quality: 90 }).toBuffer();

/** Lens queries: the same real photo changed as a shopper's own photo would be. */
export const LENS_CHANGES: Record<string, (b: Buffer) => Promise<Buffer>> = {
  mirrored: (b) => sharp(b).flop().jpeg({ quality: 90 }).toBuffer(),
  cropped: async (b) => {
    const m = await sharp(b).metadata();
    const [w, h] = [m.width!, m.height!];
    return sharp(b)
      .extract({
        left: Math.round(w * 0.15),
        top: Math.round(h * 0.15),
        width: Math.round(w * 0.7),
        height: Math.round(h * 0.7),
      })
      .jpeg({ quality: 90 })
      .toBuffer();
  },
  recompressed: async (b) => {
    const m = await sharp(b).metadata();
    return sharp(b)
      .resize(Math.round(m.width! / 2))
      .jpeg({ quality: 30 })
      .toBuffer();
  },
  // a quarter turn is EXIF's job: the decoder applies it
  rotated: rotatedBy(10),
};
