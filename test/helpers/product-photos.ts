import sharp from 'sharp';
import { seededRandom } from '../../src/lib/seeded-random';

/**
 * A product photo, 480 × 360 JPEG: one object of a category (a bottle, a bowl, a shoe-like
 * shape) on a studio background, its colours, pattern and pose drawn from `seed`. Photos of one
 * category with different seeds are different products of that category.
 */
export async function productPhoto(
  category: 'bottle' | 'bowl' | 'bag',
  seed: number,
): Promise<Buffer> {
  const r = seededRandom(seed * 7919 + category.length);
  // the golden angle apart: products of one category differ in colour first, as in a catalogue
  const hue = Math.round(seed * 137.5 + r() * 20);
  const colour = (h: number, s: number, l: number) => `hsl(${h % 360},${s}%,${l}%)`;
  const bg = colour(hue + 180, 15, 85 + r() * 10);
  const main = colour(hue, 50 + r() * 40, 35 + r() * 30);
  const accent = colour(hue + 90 + r() * 90, 60, 50);
  const dx = Math.round((r() - 0.5) * 80);
  const w = 0.7 + r() * 0.5;
  const h = 0.75 + r() * 0.4;
  const label = Array.from({ length: 2 + Math.floor(r() * 4) }, (_, i) => {
    const y = 140 + i * (20 + r() * 25);
    const kind = r();
    return kind < 0.4
      ? `<rect x="${(240 + dx - 80 * w).toFixed(0)}" y="${y.toFixed(0)}" width="${(160 * w).toFixed(0)}" height="${(6 + r() * 14).toFixed(0)}" fill="${accent}"/>`
      : kind < 0.7
        ? `<circle cx="${(240 + dx + (r() - 0.5) * 100).toFixed(0)}" cy="${y.toFixed(0)}" r="${(8 + r() * 22).toFixed(0)}" fill="${colour(hue + 200, 70, 30 + r() * 50)}"/>`
        : `<polygon points="${[0, 1, 2].map(() => `${(240 + dx + (r() - 0.5) * 160).toFixed(0)},${(y + (r() - 0.5) * 60).toFixed(0)}`).join(' ')}" fill="${colour(hue + 120, 80, 45)}"/>`;
  }).join('');
  const dots = Array.from({ length: 10 + Math.floor(r() * 30) }, () => {
    const x = 20 + r() * 440;
    const y = 20 + r() * 320;
    return `<circle cx="${x.toFixed(0)}" cy="${y.toFixed(0)}" r="${(2 + r() * 8).toFixed(1)}" fill="${colour(hue + r() * 120, 50, 20 + r() * 60)}" opacity="0.6"/>`;
  }).join('');
  const cx = 240 + dx;
  const shape =
    category === 'bottle'
      ? `<rect x="${(cx - 30 * w).toFixed(0)}" y="${(100 - 70 * h).toFixed(0)}" width="${(60 * w).toFixed(0)}" height="${(80 * h).toFixed(0)}" rx="8" fill="${main}"/><rect x="${(cx - 100 * w).toFixed(0)}" y="90" width="${(200 * w).toFixed(0)}" height="${(250 * h).toFixed(0)}" rx="${(10 + r() * 60).toFixed(0)}" fill="${main}"/>`
      : category === 'bowl'
        ? `<ellipse cx="${cx}" cy="200" rx="${(180 * w).toFixed(0)}" ry="${(120 * h).toFixed(0)}" fill="${main}"/><ellipse cx="${cx}" cy="${(160 - 30 * h).toFixed(0)}" rx="${(160 * w).toFixed(0)}" ry="${(30 + r() * 30).toFixed(0)}" fill="${accent}"/>`
        : `<rect x="${(cx - 130 * w).toFixed(0)}" y="${(130 - 20 * h).toFixed(0)}" width="${(260 * w).toFixed(0)}" height="${(200 * h).toFixed(0)}" rx="${(5 + r() * 40).toFixed(0)}" fill="${main}"/><path d="M ${(cx - 70 * w).toFixed(0)} 120 Q ${cx} ${(20 + r() * 60).toFixed(0)} ${(cx + 70 * w).toFixed(0)} 120" stroke="${main}" stroke-width="${(8 + r() * 14).toFixed(0)}" fill="none"/>`;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="360">
    <defs><radialGradient id="g"><stop offset="0" stop-color="#fff"/><stop offset="1" stop-color="${bg}"/></radialGradient></defs>
    <rect width="480" height="360" fill="url(#g)"/>${dots}${shape}${label}</svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 90 }).toBuffer();
}

/** The copies contract §18 must group with their original: 80 % crop, JPEG q40, half size. */
export async function photoVariants(
  photo: Buffer,
): Promise<Record<'crop' | 'q40' | 'half', Buffer>> {
  const m = await sharp(photo).metadata();
  const [w, h] = [m.width!, m.height!];
  return {
    crop: await sharp(photo)
      .extract({
        left: Math.round(w * 0.1),
        top: Math.round(h * 0.1),
        width: Math.round(w * 0.8),
        height: Math.round(h * 0.8),
      })
      .jpeg({ quality: 90 })
      .toBuffer(),
    q40: await sharp(photo).jpeg({ quality: 40 }).toBuffer(),
    half: await sharp(photo)
      .resize(Math.round(w / 2))
      .jpeg({ quality: 90 })
      .toBuffer(),
  };
}
