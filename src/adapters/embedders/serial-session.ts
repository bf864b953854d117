import os from 'node:os';
import * as ort from 'onnxruntime-node';

/**
 * One ONNX session per process, shared by worker jobs and lens requests. Runs are serialised,
 * each on the model's own thread pool (`threads`, default: the machine's cores), so worker
 * concurrency never makes two runs compete for the cores. The shipped model takes one image
 * per run; batching several was measured at about 10 % per image and not kept
 * (docs/embedders.md).
 */
export class SerialSession {
  /** The end of the last run asked for: each run starts after it. */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly session: ort.InferenceSession,
    /** The side of the square input the model takes. */
    readonly inputSize: number,
  ) {}

  static async create(
    model: Uint8Array,
    threads = os.availableParallelism(),
  ): Promise<SerialSession> {
    const session = await ort.InferenceSession.create(model, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
    const shape = (session.inputMetadata[0] as { shape?: Array<number | string> } | undefined)
      ?.shape;
    const side = shape?.[3];
    return new SerialSession(session, typeof side === 'number' && side > 0 ? side : 224);
  }

  /** The model's first output for one image (NCHW float input of 3 × size × size). */
  run(input: Float32Array): Promise<Float32Array> {
    const size = this.inputSize;
    if (input.length !== 3 * size * size)
      return Promise.reject(new Error(`input has ${input.length} floats, not ${3 * size * size}`));
    const run = this.tail.then(async () => {
      const feeds = {
        [this.session.inputNames[0]!]: new ort.Tensor('float32', input, [1, 3, size, size]),
      };
      const out = (await this.session.run(feeds))[this.session.outputNames[0]!]!;
      return Float32Array.from(out.data as Float32Array);
    });
    this.tail = run.catch(() => undefined);
    return run;
  }
}
