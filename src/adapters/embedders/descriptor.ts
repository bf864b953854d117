import type { Embedder, Pixels } from '../../ports/embedder';
import { normalise } from './unit';

/**
 * A deterministic visual descriptor, no model weights: colour distribution (hue/saturation/
 * value histogram with separate grey bins), coarse colour layout (mean CIELAB per cell of a
 * 4×4 grid), and shape (magnitude-weighted gradient orientations, over the whole image and per
 * 2×2 cell). Histograms are square-rooted (Hellinger) so cosine similarity compares
 * distributions well; each block is L2-normalised, weighted, and the whole vector normalised.
 */
const SIZE = 64;
const HUE_BINS = 12;
const GREY_BINS = 4;
const COLOUR_DIMS = HUE_BINS * 2 * 2 + GREY_BINS; // hue × saturation × value, plus greys
const GRID = 4;
const LAYOUT_DIMS = GRID * GRID * 3;
const ORIENT = 8;
const SHAPE_DIMS = ORIENT * (1 + 4);
const GREY_AT = HUE_BINS * 4;

/**
 * Each block's length before the whole vector is normalised: the cosine of two descriptors is
 * then the blocks' cosines mixed by their weights squared.
 */
export interface DescriptorWeights {
  colour: number;
  layout: number;
  /** gradient orientations over the whole image */
  orientation: number;
  /** gradient orientations per 2 × 2 cell */
  cellOrientation: number;
}

/** The descriptor alone (`descriptor-v1`); the hybrid gives its part its own (index.ts). */
export const DESCRIPTOR_WEIGHTS: DescriptorWeights = {
  colour: 1,
  layout: 0.6,
  orientation: 0.9,
  cellOrientation: 0.9 * 0.7,
};

/** 0 below `lo`, 1 above `hi`, linear between. */
const ramp = (x: number, lo: number, hi: number): number =>
  x <= lo ? 0 : x >= hi ? 1 : (x - lo) / (hi - lo);

function srgbToLinear(c: number): number {
  const v = c / 255;
  return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
}

const LINEAR = Float32Array.from({ length: 256 }, (_, i) => srgbToLinear(i));

const cieF = (t: number): number => (t > 0.008856 ? Math.cbrt(t) : 7.787 * t + 16 / 116);

/** CIELAB of an sRGB pixel, written into `out` (no allocation: this runs once per pixel). */
function labInto(r: number, g: number, b: number, out: Float64Array): void {
  const R = LINEAR[r]!;
  const G = LINEAR[g]!;
  const B = LINEAR[b]!;
  const x = cieF((0.4124 * R + 0.3576 * G + 0.1805 * B) / 0.95047);
  const y = cieF(0.2126 * R + 0.7152 * G + 0.0722 * B);
  const z = cieF((0.0193 * R + 0.1192 * G + 0.9505 * B) / 1.08883);
  out[0] = 116 * y - 16;
  out[1] = 500 * (x - y);
  out[2] = 200 * (y - z);
}

/** Where each block lies in the vector, [from, to): a mix of the blocks can be made anew. */
export const DESCRIPTOR_BLOCKS: Record<keyof DescriptorWeights, [number, number]> = {
  colour: [0, COLOUR_DIMS],
  layout: [COLOUR_DIMS, COLOUR_DIMS + LAYOUT_DIMS],
  orientation: [COLOUR_DIMS + LAYOUT_DIMS, COLOUR_DIMS + LAYOUT_DIMS + ORIENT],
  cellOrientation: [COLOUR_DIMS + LAYOUT_DIMS + ORIENT, COLOUR_DIMS + LAYOUT_DIMS + SHAPE_DIMS],
};

export class DescriptorEmbedder implements Embedder {
  readonly id = 'descriptor-v1';
  readonly dimensions = COLOUR_DIMS + LAYOUT_DIMS + SHAPE_DIMS;
  readonly inputSize = SIZE;

  constructor(private readonly weights: DescriptorWeights = DESCRIPTOR_WEIGHTS) {}

  embed(p: Pixels): Promise<Float32Array> {
    return Promise.resolve(this.embedSync(p));
  }

  embedSync({ data, size }: Pixels): Float32Array {
    const n = size * size;
    const v = new Float32Array(this.dimensions);
    const L = new Float32Array(n);
    const cell = size / GRID;
    const cellCount = new Float32Array(GRID * GRID);
    const lab = new Float64Array(3);
    for (let i = 0; i < n; i++) {
      const r = data[i * 3]!;
      const g = data[i * 3 + 1]!;
      const b = data[i * 3 + 2]!;
      // colour histogram (HSV), soft-binned so a colour on a bin edge (or shifted a little by
      // JPEG) lands in both neighbours instead of jumping between them
      const max = Math.max(r, g, b);
      const min = Math.min(r, g, b);
      const val = max / 255;
      const sat = max === 0 ? 0 : (max - min) / max;
      const chroma = ramp(sat, 0.15, 0.25) * ramp(val, 0.08, 0.16);
      if (chroma < 1) {
        const gp = Math.min(GREY_BINS - 1, Math.max(0, val * GREY_BINS - 0.5));
        const g0 = Math.floor(gp);
        const gf = gp - g0;
        v[GREY_AT + g0]! += (1 - chroma) * (1 - gf);
        if (gf > 0) v[GREY_AT + g0 + 1]! += (1 - chroma) * gf;
      }
      if (chroma > 0) {
        const d = max - min;
        let h: number;
        if (max === r) h = ((g - b) / d + 6) % 6;
        else if (max === g) h = (b - r) / d + 2;
        else h = (r - g) / d + 4;
        const hp = (h / 6) * HUE_BINS - 0.5;
        const h0 = Math.floor(hp);
        const hf = hp - h0;
        const s1 = ramp(sat, 0.45, 0.65);
        const v1 = ramp(val, 0.4, 0.6);
        // the two hue bins × two saturation × two value levels, unrolled: no per-pixel arrays
        for (let k = 0; k < 2; k++) {
          const hb = k === 0 ? (h0 + HUE_BINS) % HUE_BINS : (h0 + 1) % HUE_BINS;
          const wh = k === 0 ? 1 - hf : hf;
          const o = hb * 4;
          v[o]! += chroma * wh * (1 - s1) * (1 - v1);
          v[o + 1]! += chroma * wh * (1 - s1) * v1;
          v[o + 2]! += chroma * wh * s1 * (1 - v1);
          v[o + 3]! += chroma * wh * s1 * v1;
        }
      }
      // colour layout (CIELAB means per cell)
      labInto(r, g, b, lab);
      const l = lab[0]!;
      const a = lab[1]!;
      const bb = lab[2]!;
      L[i] = l;
      const x = i % size;
      const y = (i / size) | 0;
      const c = Math.min(GRID - 1, (y / cell) | 0) * GRID + Math.min(GRID - 1, (x / cell) | 0);
      const o = COLOUR_DIMS + c * 3;
      v[o]! += l / 100;
      v[o + 1]! += a / 128;
      v[o + 2]! += bb / 128;
      cellCount[c]! += 1;
    }
    for (let i = 0; i < COLOUR_DIMS; i++) v[i] = Math.sqrt(v[i]! / n);
    for (let c = 0; c < GRID * GRID; c++)
      for (let k = 0; k < 3; k++) v[COLOUR_DIMS + c * 3 + k]! /= cellCount[c] || 1;
    // shape: Sobel gradients on lightness, unsigned orientation, magnitude-weighted
    const so = COLOUR_DIMS + LAYOUT_DIMS;
    const half = size / 2;
    for (let y = 1; y < size - 1; y++) {
      for (let x = 1; x < size - 1; x++) {
        const up = (y - 1) * size + x;
        const mid = y * size + x;
        const down = (y + 1) * size + x;
        const gx =
          L[up + 1]! + 2 * L[mid + 1]! + L[down + 1]! - L[up - 1]! - 2 * L[mid - 1]! - L[down - 1]!;
        const gy =
          L[down - 1]! + 2 * L[down]! + L[down + 1]! - L[up - 1]! - 2 * L[up]! - L[up + 1]!;
        const mag = Math.sqrt(gx * gx + gy * gy);
        if (mag < 8) continue; // flat areas and noise carry no shape
        const theta = (Math.atan2(gy, gx) + Math.PI) % Math.PI;
        const bin = Math.min(ORIENT - 1, Math.floor((theta / Math.PI) * ORIENT));
        const quadrant = (y < half ? 0 : 2) + (x < half ? 0 : 1);
        v[so + bin]! += mag;
        v[so + ORIENT * (1 + quadrant) + bin]! += mag;
      }
    }
    for (let i = so; i < so + SHAPE_DIMS; i++) v[i] = Math.sqrt(v[i]!);
    const w = this.weights;
    normalise(v, 0, COLOUR_DIMS, w.colour);
    normalise(v, COLOUR_DIMS, so, w.layout);
    normalise(v, so, so + ORIENT, w.orientation);
    normalise(v, so + ORIENT, so + SHAPE_DIMS, w.cellOrientation);
    normalise(v, 0, this.dimensions, 1);
    return v;
  }
}
