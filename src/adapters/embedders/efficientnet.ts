import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ModelPrecision } from '../../config/env';
import type { Embedder, Pixels } from '../../ports/embedder';
import { PROJECT_ROOT } from '../../lib/project-root';
import { SerialSession, type SessionOptions } from './serial-session';
import { normalise } from './unit';

/** The converted models and their checksums, committed with the code (models/…/README.md). */
const DIR = path.join(PROJECT_ROOT, 'models', 'efficientnet-lite0');
export const EFFICIENTNET_MODELS: Record<ModelPrecision, string> = {
  float32: path.join(DIR, 'efficientnet-lite0.onnx'),
  int8: path.join(DIR, 'efficientnet-lite0-int8.onnx'),
};
export const EFFICIENTNET_SHA256 = path.join(DIR, 'SHA256');
const SCRIPTS: Record<ModelPrecision, string> = {
  float32: 'scripts/model/convert_efficientnet_lite0.py',
  int8: 'scripts/model/quantize_efficientnet_lite0.py',
};

/** The sha256 that models/efficientnet-lite0/SHA256 gives for a model file (sha256sum's format). */
function expectedSha256(file: string): string | undefined {
  const name = path.basename(file);
  for (const line of fs.readFileSync(EFFICIENTNET_SHA256, 'utf8').split('\n')) {
    const [sha, listed] = line.trim().split(/\s+/);
    if (listed === name) return sha;
  }
  return undefined;
}

/**
 * EfficientNet-Lite0 (ImageNet-1k weights, Apache-2.0): the 1280 global-average-pooled
 * features before the classifier, L2-normalised. Input RGB 224 × 224 as (p − 127) / 128,
 * which is how the original TensorFlow model was trained.
 */
export class EfficientNetEmbedder implements Embedder {
  readonly id: string;
  readonly dimensions = 1280;
  readonly inputSize: number;

  private constructor(
    private readonly session: SerialSession,
    precision: ModelPrecision,
  ) {
    this.inputSize = session.inputSize;
    // the quantised model's vectors differ a little (cosine ≈ 0.99 to the float ones), so
    // they are not mixed with the float model's in one dataset
    this.id = precision === 'int8' ? 'efficientnet-lite0-int8-v1' : 'efficientnet-lite0-v1';
  }

  /** Refuses a model file whose bytes are not the ones the id stands for. */
  static async load(
    opts: { precision?: ModelPrecision; file?: string } & SessionOptions = {},
  ): Promise<EfficientNetEmbedder> {
    const precision = opts.precision ?? 'float32';
    const file = opts.file ?? EFFICIENTNET_MODELS[precision];
    const bytes = fs.readFileSync(file);
    const want = expectedSha256(EFFICIENTNET_MODELS[precision]);
    const got = crypto.createHash('sha256').update(bytes).digest('hex');
    if (got !== want)
      throw new Error(
        `${file}: sha256 ${got} is not the ${want} of models/efficientnet-lite0/SHA256; rebuild it with ${SCRIPTS[precision]}`,
      );
    return new EfficientNetEmbedder(await SerialSession.create(bytes, opts), precision);
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
