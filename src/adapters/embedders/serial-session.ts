import os from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * The model's thread. onnxruntime-node's `run` is synchronous underneath its promise (it only
 * waits for setImmediate: microsoft/onnxruntime#19611, #26968), so on the main thread every
 * image held the event loop for the whole inference: 62 % of a worker process's main thread in
 * a CPU profile of bench:ingest, with every HTTP request, fetch and store write waiting behind
 * it. Here the session lives on a thread of its own and blocks only that thread. The code is
 * given as source (`eval`), so the same module runs from src/ under the tests and from dist/.
 *
 * Batching: images that arrive while a run is busy wait in `queue` and go together in the next
 * run (at most `maxBatch`). A lone image is run at once, so batching adds no latency of its
 * own; it only gathers what concurrent jobs and lens requests have already queued. Each
 * image's output does not depend on the others in its batch (the graph has no cross-batch
 * operation; checked bit for bit in test/adapters/model-thread.test.ts).
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ort);
ort.InferenceSession.create(workerData.model, {
  intraOpNumThreads: workerData.threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
}).then((session) => {
  const meta = session.inputMetadata[0];
  const shape = meta && meta.shape;
  // a model whose first dimension is a fixed number takes exactly that many images per run
  const fixed = shape && typeof shape[0] === 'number' && shape[0] > 0 ? shape[0] : undefined;
  const maxBatch = fixed === undefined ? workerData.maxBatch : 1;
  const batchable = fixed === undefined || fixed === 1;
  parentPort.postMessage({ ready: true, side: shape ? shape[3] : undefined, maxBatch, batchable });
  const input = session.inputNames[0];
  const output = session.outputNames[0];
  const run = async (group, size) => {
    const n = group.length;
    const len = group[0].input.length;
    let data = group[0].input;
    if (n > 1) {
      data = new Float32Array(n * len);
      group.forEach((g, i) => data.set(g.input, i * len));
    }
    const out = (await session.run({ [input]: new ort.Tensor('float32', data, [n, 3, size, size]) }))[output];
    const per = out.data.length / n;
    group.forEach((g, i) => {
      const one = out.data.slice(i * per, (i + 1) * per);
      parentPort.postMessage({ id: g.id, data: one, batch: i === 0 ? n : 0 }, [one.buffer]);
    });
  };
  const queue = [];
  let busy = false;
  const drain = async () => {
    while (queue.length) {
      const group = queue.splice(0, maxBatch);
      try {
        await run(group, group[0].size);
      } catch (e) {
        // A batch that fails is run one image at a time, so one bad run fails only itself.
        for (const g of group) {
          let err = e;
          if (group.length > 1) {
            try {
              await run([g], g.size);
              continue;
            } catch (e1) {
              err = e1;
            }
          }
          parentPort.postMessage({ id: g.id, error: String((err && err.message) || err) });
        }
      }
    }
    busy = false;
  };
  // The native run is synchronous on this thread: messages that arrive meanwhile are delivered
  // after it returns, and find the drain still busy, so they are taken by its next run.
  parentPort.on('message', (m) => {
    queue.push(m);
    if (busy) return;
    busy = true;
    // after the messages already delivered in this turn, so they are run together
    setImmediate(drain);
  });
}, (e) => parentPort.postMessage({ failed: String((e && e.message) || e) }));
`;

type Reply = { id: number; data?: Float32Array; error?: string; batch?: number };
type Listener = Parameters<Worker['off']>[1];

export interface SessionOptions {
  /** Threads of one run (default: the machine's cores); runs are serialised. */
  threads?: number;
  /** Most images in one run, when the model's batch dimension is not fixed. */
  maxBatch?: number;
  /** Told the number of images of every run that succeeded (a metric). */
  onRun?: (images: number) => void;
}

/**
 * Past about 8 images a run saves no more per image on a CPU (the convolutions' own threading
 * is already busy), and the batch's last image waits for all of them; measured in bench:ingest
 * (docs/embedders.md).
 */
export const DEFAULT_MAX_BATCH = 8;

/**
 * One ONNX session per process, shared by worker jobs and lens requests. Runs are serialised,
 * each on the model's own thread pool (`threads`), so worker concurrency never makes two runs
 * compete for the cores; images that queue up behind a run are run together in the next one.
 */
export class SerialSession {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: Float32Array) => void; reject: (e: Error) => void }
  >();
  private broken: Error | undefined;

  private constructor(
    private readonly thread: Worker,
    /** The side of the square input the model takes. */
    readonly inputSize: number,
    /** Most images one run takes: 1 when the model's batch dimension is fixed. */
    readonly maxBatch: number,
    onRun: (images: number) => void,
  ) {
    thread.on('message', (m: Reply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (!this.pending.size) thread.unref();
      if (m.data) {
        if (m.batch) onRun(m.batch);
        p.resolve(m.data);
      } else p.reject(new Error(`model run failed: ${m.error}`));
    });
    const fail = (e: Error) => {
      this.broken = e;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    thread.on('error', fail);
    thread.on('exit', (code) => fail(new Error(`the model's thread ended (exit code ${code})`)));
    // An idle model thread does not keep the process alive; a run in flight does.
    thread.unref();
  }

  static async create(model: Uint8Array, opts: SessionOptions = {}): Promise<SerialSession> {
    const thread = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: {
        ort: require.resolve('onnxruntime-node'),
        model,
        threads: opts.threads ?? os.availableParallelism(),
        maxBatch: Math.max(1, opts.maxBatch ?? DEFAULT_MAX_BATCH),
      },
    });
    // (listeners taken off one by one: the Worker keeps internal ones of its own)
    const listeners: Array<[string, Listener]> = [];
    type Ready = {
      ready?: boolean;
      failed?: string;
      side?: unknown;
      maxBatch?: unknown;
      batchable?: unknown;
    };
    const ready = await new Promise<Ready>((resolve, reject) => {
      const on = (event: string, f: Listener) => {
        listeners.push([event, f]);
        thread.on(event, f);
      };
      on('error', reject);
      on('exit', (code: number) => reject(new Error(`the model's thread ended (exit ${code})`)));
      on('message', (m: Ready) =>
        m.ready ? resolve(m) : reject(new Error(m.failed ?? 'the model did not load')),
      );
    })
      .catch(async (e: unknown) => {
        await thread.terminate();
        throw e;
      })
      .finally(() => {
        for (const [event, f] of listeners) thread.off(event, f);
      });
    if (ready.batchable === false) {
      await thread.terminate();
      throw new Error(
        'the model takes a fixed batch of more than one image; expected 1 or dynamic',
      );
    }
    const side = typeof ready.side === 'number' && ready.side > 0 ? ready.side : 224;
    const maxBatch = typeof ready.maxBatch === 'number' ? ready.maxBatch : 1;
    return new SerialSession(thread, side, maxBatch, opts.onRun ?? (() => {}));
  }

  /** The model's first output for one image (NCHW float input of 3 × size × size). */
  run(input: Float32Array): Promise<Float32Array> {
    const size = this.inputSize;
    if (input.length !== 3 * size * size)
      return Promise.reject(new Error(`input has ${input.length} floats, not ${3 * size * size}`));
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    // handed over, not copied, when the array owns its whole buffer
    const own = input.byteOffset === 0 && input.byteLength === input.buffer.byteLength;
    const sent = own ? input : input.slice();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.ref();
      this.thread.postMessage({ id, input: sent, size }, [sent.buffer as ArrayBuffer]);
    });
  }

  close(): Promise<void> {
    return this.thread.terminate().then(() => undefined);
  }
}
