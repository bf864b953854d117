/**
 * A labelled image set for measuring visual similarity: classes of objects (a shape in a colour
 * family) drawn with varied position, scale, rotation, colour jitter, background and pixel
 * noise. Same seed, same images.
 */
import sharp from 'sharp';
import { rng } from './common';

interface ClassSpec {
  name: string;
  hue: number;
  sat: number;
  light: number;
  shape: (cx: number, cy: number, r: number, fill: string) => string;
}

const poly = (cx: number, cy: number, r: number, n: number, inner = 1): string => {
  const pts: string[] = [];
  const steps = inner === 1 ? n : n * 2;
  for (let i = 0; i < steps; i++) {
    const rr = inner !== 1 && i % 2 ? r * inner : r;
    const a = (Math.PI * 2 * i) / steps - Math.PI / 2;
    pts.push(`${(cx + rr * Math.cos(a)).toFixed(1)},${(cy + rr * Math.sin(a)).toFixed(1)}`);
  }
  return pts.join(' ');
};

export const CLASSES: ClassSpec[] = [
  {
    name: 'red-circle',
    hue: 0,
    sat: 80,
    light: 50,
    shape: (x, y, r, f) => `<circle cx="${x}" cy="${y}" r="${r}" fill="${f}"/>`,
  },
  {
    name: 'blue-circle',
    hue: 220,
    sat: 75,
    light: 45,
    shape: (x, y, r, f) => `<circle cx="${x}" cy="${y}" r="${r}" fill="${f}"/>`,
  },
  {
    name: 'red-square',
    hue: 0,
    sat: 80,
    light: 50,
    shape: (x, y, r, f) =>
      `<rect x="${x - r}" y="${y - r}" width="${2 * r}" height="${2 * r}" fill="${f}"/>`,
  },
  {
    name: 'green-triangle',
    hue: 130,
    sat: 60,
    light: 40,
    shape: (x, y, r, f) => `<polygon points="${poly(x, y, r, 3)}" fill="${f}"/>`,
  },
  {
    name: 'yellow-star',
    hue: 50,
    sat: 90,
    light: 55,
    shape: (x, y, r, f) => `<polygon points="${poly(x, y, r, 5, 0.45)}" fill="${f}"/>`,
  },
  {
    name: 'black-cross',
    hue: 0,
    sat: 0,
    light: 12,
    shape: (x, y, r, f) =>
      `<g fill="${f}"><rect x="${x - r}" y="${y - r / 4}" width="${2 * r}" height="${r / 2}"/><rect x="${x - r / 4}" y="${y - r}" width="${r / 2}" height="${2 * r}"/></g>`,
  },
  {
    name: 'purple-ring',
    hue: 280,
    sat: 55,
    light: 45,
    shape: (x, y, r, f) =>
      `<circle cx="${x}" cy="${y}" r="${r * 0.8}" fill="none" stroke="${f}" stroke-width="${r * 0.35}"/>`,
  },
  {
    name: 'orange-stripes',
    hue: 28,
    sat: 90,
    light: 52,
    shape: (x, y, r, f) =>
      [0, 1, 2, 3]
        .map(
          (k) =>
            `<rect x="${x - r}" y="${y - r + k * r * 0.55}" width="${2 * r}" height="${r * 0.28}" fill="${f}"/>`,
        )
        .join(''),
  },
  {
    name: 'teal-diamond',
    hue: 180,
    sat: 65,
    light: 38,
    shape: (x, y, r, f) => `<polygon points="${poly(x, y, r, 4)}" fill="${f}"/>`,
  },
  {
    name: 'blue-stripes',
    hue: 220,
    sat: 75,
    light: 45,
    shape: (x, y, r, f) =>
      [0, 1, 2, 3]
        .map(
          (k) =>
            `<rect x="${x - r}" y="${y - r + k * r * 0.55}" width="${2 * r}" height="${r * 0.28}" fill="${f}"/>`,
        )
        .join(''),
  },
];

export interface LabelledImage {
  id: string;
  label: string;
  bytes: Buffer;
  format: 'png' | 'jpeg';
}

const SIZE = 160;

export async function labelledImages(perClass: number, seed = 7): Promise<LabelledImage[]> {
  const r = rng(seed);
  const out: LabelledImage[] = [];
  for (const [ci, c] of CLASSES.entries()) {
    for (let k = 0; k < perClass; k++) {
      const radius = SIZE * (0.18 + r() * 0.17);
      const cx = radius + r() * (SIZE - 2 * radius);
      const cy = radius + r() * (SIZE - 2 * radius);
      const rot = (r() - 0.5) * 50;
      const hue = (c.hue + (r() - 0.5) * 24 + 360) % 360;
      const sat = Math.max(0, Math.min(100, c.sat + (r() - 0.5) * 24));
      const light = Math.max(5, Math.min(90, c.light + (r() - 0.5) * 18));
      const bg = 235 + Math.floor(r() * 20);
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${SIZE}" height="${SIZE}">
        <rect width="100%" height="100%" fill="rgb(${bg},${bg},${bg - Math.floor(r() * 10)})"/>
        <g transform="rotate(${rot.toFixed(1)} ${cx.toFixed(1)} ${cy.toFixed(1)})">${c.shape(cx, cy, radius, `hsl(${hue.toFixed(0)},${sat.toFixed(0)}%,${light.toFixed(0)}%)`)}</g></svg>`;
      const raw = await sharp(Buffer.from(svg)).removeAlpha().raw().toBuffer();
      const amp = 6 + r() * 18; // pixel noise
      for (let i = 0; i < raw.length; i++)
        raw[i] = Math.max(0, Math.min(255, raw[i]! + (r() - 0.5) * 2 * amp));
      const img = sharp(raw, { raw: { width: SIZE, height: SIZE, channels: 3 } });
      const format = r() < 0.5 ? 'png' : 'jpeg';
      const bytes =
        format === 'png' ? await img.png().toBuffer() : await img.jpeg({ quality: 80 }).toBuffer();
      out.push({ id: `${c.name}-${String(k).padStart(3, '0')}`, label: c.name, bytes, format });
      void ci;
    }
  }
  return out;
}
