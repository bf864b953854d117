/**
 * A picture's layout in grey, small enough to keep with every item, for telling copies of one
 * photo (a crop, a recompression, a resize) from photos of similar products, which embeddings
 * place as close (contract §18). Two copies match at some zoom and offset; two photos of one
 * kind of product rarely do, at any.
 */

/** Side of the grey thumbnail, in cells. */
const SIDE = 32;
const CELLS = SIDE * SIDE;
/** Side of the colour thumbnail (blue and red difference), in cells. */
const TINT_SIDE = 8;
const TINTS = TINT_SIDE * TINT_SIDE;
/**
 * Copies keep their colours: two pictures whose tints differ by more than this (tintDistance,
 * 0–255) are no copies, however alike their layouts in grey (a product in another colour,
 * photographed the same way).
 */
const TINT_MAX = 12;
/** A cell this close to grey (|Cb| + |Cr|) has no colour to compare. */
const NEUTRAL = 16;
/** How much of a side one picture may show of the other: down to 70 %, as a crop keeps. */
const ZOOMS = [0.9, 0.8, 0.7];
/** Where a zoomed window sits along each axis, as a share of the free span. */
const PLACES = [0, 0.5, 1];

/** Signatures whose windows a CopyMatcher keeps (about 30 MB). */
const KEPT_SIGNATURES = 256;

/** Copies match at least this well (normalised cross-correlation, −1–1); see copyScore. */
export const COPY_MATCH = 0.85;

/**
 * The signature of a decode: `rgb` is `size` × `size` pixels, 3 bytes each, as the analyzer
 * decodes for its embedder. 32 × 32 cells of mean grey, then 8 × 8 of mean blue and red
 * difference (YCbCr, offset by 128); base64url, 1,536 chars.
 */
export function copySignature(rgb: Uint8Array, size: number): string {
  const grey = new Float64Array(CELLS);
  const counts = new Float64Array(CELLS);
  const tint = new Float64Array(2 * TINTS);
  const tintCounts = new Float64Array(TINTS);
  for (let y = 0; y < size; y++) {
    const cy = Math.floor((y * SIDE) / size);
    const ty = Math.floor((y * TINT_SIDE) / size);
    for (let x = 0; x < size; x++) {
      const o = (y * size + x) * 3;
      const [r, g, b] = [rgb[o]!, rgb[o + 1]!, rgb[o + 2]!];
      const c = cy * SIDE + Math.floor((x * SIDE) / size);
      grey[c]! += 0.299 * r + 0.587 * g + 0.114 * b;
      counts[c]!++;
      const t = ty * TINT_SIDE + Math.floor((x * TINT_SIDE) / size);
      tint[t]! += -0.1687 * r - 0.3313 * g + 0.5 * b;
      tint[TINTS + t]! += 0.5 * r - 0.4187 * g - 0.0813 * b;
      tintCounts[t]!++;
    }
  }
  const out = new Uint8Array(CELLS + 2 * TINTS);
  for (let c = 0; c < CELLS; c++) out[c] = Math.round(grey[c]! / Math.max(1, counts[c]!));
  for (let t = 0; t < 2 * TINTS; t++)
    out[CELLS + t] = Math.round(128 + tint[t]! / Math.max(1, tintCounts[t % TINTS]!));
  return Buffer.from(out).toString('base64url');
}

interface Parsed {
  /** The grey picture and its zoomed windows, each normalised. */
  views: Float32Array[];
  /** The tint planes (blue, red difference, centred on 0) and their windows, alike. */
  tints: Array<[Float32Array, Float32Array]>;
}

/** A signature's parts; undefined when it is not one copySignature wrote. */
function parse(signature: string): Parsed | undefined {
  const bytes = Buffer.from(signature, 'base64url');
  if (bytes.length !== CELLS + 2 * TINTS) return undefined;
  const plane = (from: number, n: number) =>
    Float32Array.from(bytes.subarray(from, from + n), (x) => (from >= CELLS ? x - 128 : x));
  const [blue, red] = [
    windows(plane(CELLS, TINTS), TINT_SIDE),
    windows(plane(CELLS + TINTS, TINTS), TINT_SIDE),
  ];
  return {
    views: windows(plane(0, CELLS), SIDE).map(normalised),
    tints: blue.map((b, i) => [b, red[i]!]),
  };
}

/**
 * How far apart two tints are: the mean absolute difference of blue and red difference over
 * the cells where either picture has colour (a neutral background both share would dilute it).
 */
function tintDistance(a: [Float32Array, Float32Array], b: [Float32Array, Float32Array]): number {
  let sum = 0;
  let cells = 0;
  for (let t = 0; t < TINTS; t++) {
    const [ab, ar, bb, br] = [a[0][t]!, a[1][t]!, b[0][t]!, b[1][t]!];
    if (Math.abs(ab) + Math.abs(ar) <= NEUTRAL && Math.abs(bb) + Math.abs(br) <= NEUTRAL) continue;
    sum += (Math.abs(ab - bb) + Math.abs(ar - br)) / 2;
    cells++;
  }
  return cells ? sum / cells : 0;
}

/** The value of a `side` × `side` plane at a fractional position (bilinear, edges held). */
function at(t: Float32Array, side: number, x: number, y: number): number {
  const cx = Math.min(side - 1, Math.max(0, x));
  const cy = Math.min(side - 1, Math.max(0, y));
  const x0 = Math.floor(cx);
  const y0 = Math.floor(cy);
  const x1 = Math.min(side - 1, x0 + 1);
  const y1 = Math.min(side - 1, y0 + 1);
  const fx = cx - x0;
  const fy = cy - y0;
  const top = t[y0 * side + x0]! * (1 - fx) + t[y0 * side + x1]! * fx;
  const bottom = t[y1 * side + x0]! * (1 - fx) + t[y1 * side + x1]! * fx;
  return top * (1 - fy) + bottom * fy;
}

/** Zero mean, unit length: then a dot product is the normalised cross-correlation. */
function normalised(v: Float32Array): Float32Array {
  let mean = 0;
  for (const x of v) mean += x;
  mean /= v.length;
  let norm = 0;
  const out = v.map((x) => x - mean);
  for (const x of out) norm += x * x;
  norm = Math.sqrt(norm) || 1;
  return out.map((x) => x / norm);
}

/**
 * A plane and its zoomed windows (a crop of it seen at full size), in one order for every
 * plane: the whole first, then each zoom at each place.
 */
function windows(t: Float32Array, side: number): Float32Array[] {
  const out = [t];
  for (const z of ZOOMS) {
    const span = side * (1 - z);
    for (const px of PLACES)
      for (const py of PLACES) {
        const v = new Float32Array(side * side);
        for (let y = 0; y < side; y++)
          for (let x = 0; x < side; x++)
            v[y * side + x] = at(
              t,
              side,
              span * px + (x + 0.5) * z - 0.5,
              span * py + (y + 0.5) * z - 0.5,
            );
        out.push(v);
      }
  }
  return out;
}

const dot = (a: Float32Array, b: Float32Array): number => {
  let s = 0;
  for (let i = 0; i < CELLS; i++) s += a[i]! * b[i]!;
  return s;
};

/**
 * Compares signatures, keeping each one's views between calls. The score is the best
 * correlation of either picture's grey layout, whole, with the other's whole or zoomed windows,
 * less 1 when their tints differ beyond TINT_MAX: copies of one photo score at least
 * COPY_MATCH (docs/api-notes.md: measured on the food photos' crops, recompressions and
 * resizes), different photos mostly well below.
 */
export class CopyMatcher {
  private readonly seen = new Map<string, Parsed | undefined>();

  /** −2–1; undefined when either signature is missing or malformed. */
  score(a: string | undefined, b: string | undefined): number | undefined {
    const pa = a === undefined ? undefined : this.parsed(a);
    const pb = b === undefined ? undefined : this.parsed(b);
    if (!pa || !pb) return undefined;
    // the best window of either picture against the other whole; its tint at the same window
    let best = dot(pa.views[0]!, pb.views[0]!);
    let tint = tintDistance(pa.tints[0]!, pb.tints[0]!);
    const consider = (
      score: number,
      ta: [Float32Array, Float32Array],
      tb: [Float32Array, Float32Array],
    ) => {
      if (score <= best) return;
      best = score;
      tint = tintDistance(ta, tb);
    };
    for (let i = 1; i < pa.views.length; i++)
      consider(dot(pa.views[i]!, pb.views[0]!), pa.tints[i]!, pb.tints[0]!);
    for (let i = 1; i < pb.views.length; i++)
      consider(dot(pa.views[0]!, pb.views[i]!), pa.tints[0]!, pb.tints[i]!);
    return tint > TINT_MAX ? best - 1 : best;
  }

  private parsed(signature: string): Parsed | undefined {
    if (!this.seen.has(signature)) {
      // a pass compares each item with its few neighbours, one batch at a time: a small memory
      // of views suffices (each signature's windows are about 120 KB)
      if (this.seen.size >= KEPT_SIGNATURES) this.seen.clear();
      this.seen.set(signature, parse(signature));
    }
    return this.seen.get(signature);
  }
}
