import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Embedder, Pixels } from '../../ports/embedder';
import { PROJECT_ROOT } from '../../lib/project-root';
import { SerialSession, type SessionOptions } from './serial-session';
import { normalise } from './unit';

/** The converted model and its checksum, committed with the code (models/…/README.md). */
const DIR = path.join(PROJECT_ROOT, 'models', 'efficientnet-lite0');
export const EFFICIENTNET_MODEL = path.join(DIR, 'efficientnet-lite0.onnx');
export const EFFICIENTNET_SHA256 = path.join(DIR, 'SHA256');

/**
 * EfficientNet-Lite0 (ImageNet-1k weights, Apache-2.0): the 1280 global-average-pooled
 * features before the classifier, L2-normalised. Input RGB 224 × 224 as (p − 127) / 128,
 * which is how the original TensorFlow model was trained.
 */
export class EfficientNetEmbedder implements Embedder {
  readonly id = 'efficientnet-lite0-v1';
  readonly dimensions = 1280;
  readonly inputSize: number;

  private constructor(private readonly session: SerialSession) {
    this.inputSize = session.inputSize;
  }

  /** Refuses a model file whose bytes are not the ones the id stands for. */
  static async load(opts: { file?: string } & SessionOptions = {}): Promise<EfficientNetEmbedder> {
    const file = opts.file ?? EFFICIENTNET_MODEL;
    const bytes = fs.readFileSync(file);
    const want = fs.readFileSync(EFFICIENTNET_SHA256, 'utf8').trim().split(/\s+/)[0];
    const got = crypto.createHash('sha256').update(bytes).digest('hex');
    if (got !== want)
      throw new Error(
        `${file}: sha256 ${got} is not the ${want} of models/efficientnet-lite0/SHA256; rebuild it with scripts/model/convert_efficientnet_lite0.py`,
      );
    return new EfficientNetEmbedder(await SerialSession.create(bytes, opts));
  }

  async embed({ data, size }: Pixels): Promise<Float32Array> {
    // No averaging with the mirrored image's features: twice the inference for no gain in
    // precision or lens recall (docs/embedders.md).
    const v = await this.session.run(tensorOf(data, size));
    normalise(v);
    return v;
  }

  /** Most images one model run takes (1: every image alone). */
  get maxBatch(): number {
    return this.session.maxBatch;
  }

  close(): Promise<void> {
    return this.session.close();
  }
}

/** NCHW float input, (p − 127) / 128. */
function tensorOf(data: Uint8Array, size: number): Float32Array {
  const plane = size * size;
  const input = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++)
    for (let c = 0; c < 3; c++) input[c * plane + i] = (data[i * 3 + c]! - 127) / 128;
  return input;
}
