/**
 * Memory that image decodes hold at once, one budget per process, shared by the workers and lens
 * requests: without one, a few progressive CMYK JPEGs of 40 MP, about 1 MB each, take a process
 * past 2 GB. A decode states its weight, estimated from the header, and waits its turn. Turns
 * are first come, first served, so a stream of small images never starves a large one; a weight
 * above the whole budget runs alone (the image analyzer refuses such decodes before they get here).
 */
export class DecodeBudget {
  #used = 0;
  #running = 0;
  readonly #queue: Array<{ weight: number; go: () => void }> = [];

  constructor(readonly capacity: number) {}

  /** Bytes held by the decodes running now. */
  get inUse(): number {
    return this.#used;
  }

  async run<T>(weight: number, task: () => Promise<T>): Promise<T> {
    await new Promise<void>((go) => {
      this.#queue.push({ weight, go });
      this.#admit();
    });
    try {
      return await task();
    } finally {
      this.#used -= weight;
      this.#running -= 1;
      this.#admit();
    }
  }

  #admit(): void {
    for (;;) {
      const next = this.#queue[0];
      if (!next || (this.#running > 0 && this.#used + next.weight > this.capacity)) return;
      this.#queue.shift();
      this.#used += next.weight;
      this.#running += 1;
      next.go();
    }
  }
}

/** What sharp's metadata() reads from the header, as far as memory is concerned. */
export interface Header {
  format?: string;
  width?: number;
  height?: number;
  channels?: number;
  depth?: string;
  isProgressive?: boolean;
  chromaSubsampling?: string;
}

/** A pipeline's own cost whatever the image (libvips regions, the thread's buffers), measured. */
const PIPELINE_BYTES = 4 * 2 ** 20;

/** Stored samples per pixel of a JPEG: "4:2:0" keeps 1.5, "4:4:4:4" (CMYK) keeps 4. */
function jpegSamples(subsampling: string | undefined, channels: number): number {
  const [j, a, b, extra] = (subsampling ?? '').split(':').map(Number);
  if (!j || !a || b === undefined || Number.isNaN(b)) return channels;
  const chroma = (a / j) * (b === 0 ? 0.5 : b / a);
  return 1 + 2 * chroma + (extra ? 1 : 0);
}

/**
 * Bytes a decode holds at its peak, from the header alone. The figures match what one decode
 * adds to RSS, measured with sharp 0.35 (libvips 8.18) on 40 MP images: 310 MiB for a
 * progressive CMYK JPEG, 117 MiB progressive 4:2:0, 124 MiB interlaced RGB PNG, 7–20 MiB for a
 * baseline JPEG or a plain PNG.
 */
export function decodeFootprint(h: Header): number {
  const pixels = (h.width ?? 0) * (h.height ?? 0);
  const channels = h.channels ?? 4;
  // libjpeg keeps every DCT coefficient (16 bits) of a progressive image until its last scan,
  // whatever scale it decodes at: shrink-on-load saves nothing here.
  if (h.format === 'jpeg' && h.isProgressive)
    return PIPELINE_BYTES + pixels * 2 * jpegSamples(h.chromaSubsampling, channels);
  const bytes = pixels * channels * (h.depth === 'ushort' ? 2 : 1);
  // An interlaced (Adam7) PNG is decoded whole before its first row exists. Anything else is
  // read in strips (sequential access; a baseline JPEG also shrinks on load), which stayed
  // within an eighth of the image in every measurement.
  return PIPELINE_BYTES + (h.format === 'png' && h.isProgressive ? bytes : bytes / 8);
}

/**
 * Bytes a DC-only read of a progressive JPEG holds (jpeg-dc.ts): per 8 × 8 block and
 * component a 16-bit coefficient, a sample and an output sample, then the TIFF copy handed to
 * sharp and sharp's own decode of it; measured 17 MiB for 40 MP CMYK.
 */
export function dcFootprint(h: Header): number {
  const blocks = Math.ceil((h.width ?? 0) / 8) * Math.ceil((h.height ?? 0) / 8);
  return PIPELINE_BYTES + blocks * (h.channels ?? 4) * 8;
}
