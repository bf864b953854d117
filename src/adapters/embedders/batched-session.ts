import os from 'node:os';
import * as ort from 'onnxruntime-node';

/** How many images one model run takes at most. */
const MAX_BATCH = 8;

interface Waiting {
  input: Float32Array;
  done: (out: Float32Array | Error) => void;
}

/**
 * One ONNX session per process, shared by worker jobs and lens requests. Runs are serialised
 * and batched: what arrives while the model runs goes into the next run (up to MAX_BATCH
 * images), so concurrent jobs cost one run instead of many, and the model's own thread pool
 * (`threads`, default: the machine's cores) never competes with a second run for the cores.
 */
export class BatchedSession {
  private readonly waiting: Waiting[] = [];
  private running = false;

  private constructor(
    private readonly session: ort.InferenceSession,
    /** Floats per image: 3 × size × size. */
    private readonly inputLength: number,
    private readonly size: number,
    private readonly batchable: boolean,
  ) {}

  static async create(
    model: Uint8Array,
    threads = os.availableParallelism(),
  ): Promise<BatchedSession> {
    const session = await ort.InferenceSession.create(model, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
    const shape = (session.inputMetadata[0] as { shape?: Array<number | string> } | undefined)
      ?.shape;
    const side = shape?.[3];
    const size = typeof side === 'number' && side > 0 ? side : 224;
    // a symbolic (or -1) first dimension takes a batch; a fixed 1 does not
    const batchable = typeof shape?.[0] !== 'number' || shape[0] < 1;
    return new BatchedSession(session, 3 * size * size, size, batchable);
  }

  /** The side of the square input the model takes. */
  get inputSize(): number {
    return this.size;
  }

  /** The model's first output for one image (NCHW float input of 3 × size × size). */
  run(input: Float32Array): Promise<Float32Array> {
    if (input.length !== this.inputLength)
      return Promise.reject(new Error(`input has ${input.length} floats, not ${this.inputLength}`));
    return new Promise((resolve, reject) => {
      this.waiting.push({ input, done: (o) => (o instanceof Error ? reject(o) : resolve(o)) });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length) {
        const batch = this.waiting.splice(0, this.batchable ? MAX_BATCH : 1);
        try {
          const outs = await this.runBatch(batch.map((w) => w.input));
          batch.forEach((w, i) => w.done(outs[i]!));
        } catch (e) {
          batch.forEach((w) => w.done(e instanceof Error ? e : new Error(String(e))));
        }
      }
    } finally {
      this.running = false;
    }
  }

  private async runBatch(inputs: Float32Array[]): Promise<Float32Array[]> {
    const n = inputs.length;
    const data = new Float32Array(n * this.inputLength);
    inputs.forEach((x, i) => data.set(x, i * this.inputLength));
    const feeds = {
      [this.session.inputNames[0]!]: new ort.Tensor('float32', data, [n, 3, this.size, this.size]),
    };
    const out = (await this.session.run(feeds))[this.session.outputNames[0]!]!;
    const flat = out.data as Float32Array;
    const per = flat.length / n;
    return inputs.map((_, i) => flat.slice(i * per, (i + 1) * per));
  }
}
