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
  // Pool threads that spin after a run (ONNX Runtime's default, for back-to-back runs) take
  // the cores from sharp's decoding and the store: the raw analyzer loop did 13–21 % more
  // images per second without it, at 3.5–4.8 ms less CPU per image (2 cores, 2026-11-25).
  extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
}).then((session) => {
  const inShape = session.inputMetadata && session.inputMetadata[0] && session.inputMetadata[0].shape;
  const outShape = session.outputMetadata && session.outputMetadata[0] && session.outputMetadata[0].shape;
  const fixed = (shape) => (shape && typeof shape[0] === 'number' && shape[0] > 0 ? shape[0] : undefined);
  // several images a run only when the input's and the first output's first dimension are free
  let maxBatch = fixed(inShape) === undefined && fixed(outShape) === undefined ? workerData.maxBatch : 1;
  const batchable = fixed(inShape) === undefined || fixed(inShape) === 1;
  const side = inShape && typeof inShape[3] === 'number' && inShape[3] > 0 ? inShape[3] : 224;
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
    // one row per image, or the rows cannot be told apart (one image: any shape, flattened)
    if (n > 1 && (out.dims[0] !== n || out.data.length % n))
      throw new Error('the first output has shape [' + out.dims.join(', ') + '] for ' + n + ' images');
    const per = out.data.length / n;
    return group.map((g, i) => Float32Array.from(out.data.subarray(i * per, (i + 1) * per)));
  };
  // A model can declare a free batch dimension and still not take a batch (a reshape to one
  // image, a statistic over the batch): two images run together must come back as each does
  // alone, or the model is given one image a run. Undefined when batches are fine.
  const probe = async () => {
    const len = 3 * side * side;
    // one image below zero and one above: mixed rows differ even for a model that only averages
    const images = [-1, 1].map((sign) => ({
      input: Float32Array.from({ length: len }, (_, i) => sign * (0.25 + ((i * 7) % 64) / 128)),
    }));
    let alone;
    try {
      alone = [(await run([images[0]], side))[0], (await run([images[1]], side))[0]];
    } catch {
      return undefined; // not a batching matter: the service's own runs will report it
    }
    try {
      const together = await run(images, side);
      const same = together.every((v, k) =>
        v.length === alone[k].length &&
        v.every((x, i) => Math.abs(x - alone[k][i]) <= 1e-4 * (1 + Math.abs(alone[k][i]))));
      return same ? undefined : 'two images run together did not come back as each does alone';
    } catch (e) {
      return String((e && e.message) || e);
    }
  };
  const send = (g, data, batch) => parentPort.postMessage({ id: g.id, data, batch }, [data.buffer]);
  const queue = [];
  let busy = false;
  const drain = async () => {
    while (queue.length) {
      const group = queue.splice(0, maxBatch);
      let rows;
      try {
        rows = await run(group, group[0].size);
      } catch (e) {
        // A batch that fails is run one image at a time, so one bad run fails only itself.
        let degraded = group.length === 1;
        for (const g of group) {
          try {
            if (group.length === 1) throw e;
            const [row] = await run([g], g.size);
            // It ran alone but not with the others: the model cannot take a batch, whatever its
            // declared shape says, and a failed run each time would double the work. Said
            // before any result, so the caller of the first image already sees the new limit.
            if (!degraded) {
              degraded = true;
              maxBatch = 1;
              parentPort.postMessage({ degraded: String((e && e.message) || e) });
            }
            send(g, row, 1);
          } catch (err) {
            parentPort.postMessage({ id: g.id, error: String((err && err.message) || err) });
          }
        }
        continue;
      }
      group.forEach((g, i) => send(g, rows[i], i === 0 ? group.length : 0));
    }
    busy = false;
  };
  // The native run is synchronous on this thread: messages that arrive meanwhile are delivered
  // after it returns, and find the drain still busy, so they are taken by its next run.
  parentPort.on('message', (m) => {
    for (const item of m.items) queue.push(item);
    if (busy) return;
    busy = true;
    // after the messages already delivered in this turn, so they are run together
    setImmediate(drain);
  });
  return (maxBatch > 1 && batchable ? probe() : Promise.resolve(undefined)).then((degraded) => {
    if (degraded) maxBatch = 1;
    parentPort.postMessage({ ready: true, side, maxBatch, batchable, degraded });
  });
}).catch((e) => parentPort.postMessage({ failed: String((e && e.message) || e) }));
`;

type Reply = {
  id: number;
  data?: Float32Array;
  error?: string;
  batch?: number;
  degraded?: string;
};
type Listener = Parameters<Worker['off']>[1];
type Item = { id: number; input: Float32Array; size: number };

export interface SessionOptions {
  /** Threads of one run (default: the machine's cores); runs are serialised. */
  threads?: number;
  /** Most images in one run, when the model's batch dimension is not fixed. */
  maxBatch?: number;
  /** Told the number of images of every run that succeeded (a metric). */
  onRun?: (images: number) => void;
  /** Told when the model is found unable to take a batch (default: a process warning). */
  onWarning?: (message: string) => void;
}

const DEGRADED = (reason: string) =>
  `the model cannot take several images a run (${reason}); it is given one image a run`;

/**
 * Per image, a run of 8 took 0.83–0.87 of a run of one on 2 cores, and 16 saved no more while
 * the process's peak memory grew by 90–105 MB more (bench/results/model-batch.json, runs of
 * 2026-11-25); the last image of a batch also waits for all of them.
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
  /** Images asked for in this turn of the event loop, handed to the thread together. */
  private outbox: Item[] = [];

  private constructor(
    private readonly thread: Worker,
    /** The side of the square input the model takes. */
    readonly inputSize: number,
    private batchLimit: number,
    onRun: (images: number) => void,
    onWarning: (message: string) => void,
  ) {
    thread.on('message', (m: Reply) => {
      if (m.degraded !== undefined) {
        this.batchLimit = 1;
        onWarning(DEGRADED(m.degraded));
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (!this.pending.size) thread.unref();
      if (!m.data) return p.reject(new Error(`model run failed: ${m.error}`));
      p.resolve(m.data);
      try {
        if (m.batch) onRun(m.batch);
      } catch {
        // a metric's failure is not the run's
      }
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
    const maxBatch = opts.maxBatch ?? DEFAULT_MAX_BATCH;
    if (!Number.isInteger(maxBatch) || maxBatch < 1)
      throw new Error(`maxBatch must be a whole number of images, 1 or more; not ${maxBatch}`);
    const thread = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: {
        ort: require.resolve('onnxruntime-node'),
        model,
        threads: opts.threads ?? os.availableParallelism(),
        maxBatch,
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
      degraded?: string;
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
    const warn = opts.onWarning ?? ((m: string) => process.emitWarning(m, 'EmbedderWarning'));
    if (ready.degraded) warn(DEGRADED(ready.degraded));
    return new SerialSession(
      thread,
      ready.side as number,
      ready.maxBatch as number,
      opts.onRun ?? (() => {}),
      warn,
    );
  }

  /** Most images one run takes: 1 when the model's batch dimension is fixed or failed. */
  get maxBatch(): number {
    return this.batchLimit;
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
      // Images asked for in the same turn (Promise.all over a page, a lens request's views)
      // reach the thread as one message, so they are sure to share a run.
      if (!this.outbox.length) queueMicrotask(() => this.flush());
      this.outbox.push({ id, input: sent, size });
    });
  }

  private flush(): void {
    const items = this.outbox;
    this.outbox = [];
    try {
      this.thread.ref();
      this.thread.postMessage(
        { items },
        items.map((i) => i.input.buffer as ArrayBuffer),
      );
    } catch (e) {
      for (const { id } of items) {
        this.pending.get(id)?.reject(e instanceof Error ? e : new Error(String(e)));
        this.pending.delete(id);
      }
      if (!this.pending.size) this.thread.unref();
    }
  }

  close(): Promise<void> {
    return this.thread.terminate().then(() => undefined);
  }
}
