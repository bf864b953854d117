import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Embedder, Pixels } from '../../ports/embedder';
import { SerialSession, type SessionOptions } from './serial-session';
import { normalise } from './unit';

/** CLIP's input normalisation (also close to ImageNet's); see docs/embedders.md. */
const MEAN = [0.48145466, 0.4578275, 0.40821073];
const STD = [0.26862954, 0.26130258, 0.27577711];

/**
 * Runs an image-embedding model exported to ONNX (e.g. a CLIP image encoder). Input: the
 * model's first input, float32 NCHW [N, 3, S, S] RGB, normalised as CLIP does; S is read from
 * the model (224 when it is dynamic), N is 1 or dynamic (then concurrent images are run
 * together). It runs on the model's own thread (serial-session.ts). Output: the first output,
 * one row per image, L2-normalised.
 */
export class OnnxEmbedder implements Embedder {
  private constructor(
    private readonly session: SerialSession,
    readonly id: string,
    readonly inputSize: number,
    readonly dimensions: number,
  ) {}

  static async load(file: string, opts: SessionOptions = {}): Promise<OnnxEmbedder> {
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(file);
    } catch (e) {
      throw new Error(`EMBEDDER_MODEL_PATH: cannot read ${file}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    let session: SerialSession;
    try {
      session = await SerialSession.create(bytes, opts);
    } catch (e) {
      throw new Error(
        `EMBEDDER_MODEL_PATH: ${file} is not a usable ONNX model: ${(e as Error).message}`,
        { cause: e },
      );
    }
    const size = session.inputSize;
    const id = `onnx-${crypto.createHash('sha256').update(bytes).digest('hex').slice(0, 12)}`;
    const probe = new OnnxEmbedder(session, id, size, 0);
    let dims: number;
    try {
      dims = (await probe.raw({ data: new Uint8Array(size * size * 3), size })).length;
      if (!dims) throw new Error('it produced an empty embedding');
    } catch (e) {
      await session.close();
      throw new Error(`EMBEDDER_MODEL_PATH: ${file}: ${(e as Error).message}`, { cause: e });
    }
    return new OnnxEmbedder(session, id, size, dims);
  }

  private async raw({ data, size }: Pixels): Promise<Float32Array> {
    const plane = size * size;
    const input = new Float32Array(3 * plane);
    for (let i = 0; i < plane; i++)
      for (let c = 0; c < 3; c++)
        input[c * plane + i] = (data[i * 3 + c]! / 255 - MEAN[c]!) / STD[c]!;
    return this.session.run(input);
  }

  async embed(p: Pixels): Promise<Float32Array> {
    const v = await this.raw(p);
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
