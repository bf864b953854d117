/**
 * onnxruntime-node's `run` is synchronous underneath its promise (it only waits for
 * setImmediate: microsoft/onnxruntime#19611, #26968), so on the main thread every image held
 * the event loop for the whole inference, with every HTTP request, fetch and store write
 * waiting behind it. The session lives on a thread of its own (model-thread.ts) and blocks only
 * that thread; this is the main side.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Handshake, Item, Reply, Request, ThreadData } from './model-thread-protocol';
import { threadFile as moduleThreadFile } from '../../lib/thread-file';

const THREAD = 'model-thread';

/** The file the model's thread starts from (src/lib/thread-file.ts). */
export const threadFile = (dir: string = __dirname): Promise<string> =>
  moduleThreadFile(dir, THREAD);

type Listener = Parameters<Worker['off']>[1];

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
 * Per image, a run of 8 costs less than a run of one, and 16 saves no more while the process's
 * peak memory grows (docs/engines.md); the last image of a batch also waits for all.
 */
const DEFAULT_MAX_BATCH = 8;

/**
 * One ONNX session per process, shared by worker jobs and lens requests. Runs are serialised,
 * each on the model's own thread pool (`threads`), so worker concurrency never makes two runs
 * compete for the cores; images that queue up behind a run are run together in the next one.
 * Each image's output does not depend on the others in its batch (the graph has no cross-batch
 * operation; checked bit for bit in test/adapters/model-thread.test.ts).
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
      if (m.type === 'degraded') {
        this.batchLimit = 1;
        onWarning(DEGRADED(m.reason));
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (!this.pending.size) thread.unref();
      if (m.type === 'error') return p.reject(new Error(`model run failed: ${m.error}`));
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
    const workerData: ThreadData = {
      model,
      threads: opts.threads ?? os.availableParallelism(),
      maxBatch,
    };
    const thread = new Worker(await threadFile(), { workerData });
    // (listeners taken off one by one: the Worker keeps internal ones of its own)
    const listeners: Array<[string, Listener]> = [];
    const ready = await new Promise<Extract<Handshake, { type: 'ready' }>>((resolve, reject) => {
      const on = (event: string, f: Listener) => {
        listeners.push([event, f]);
        thread.on(event, f);
      };
      on('error', reject);
      on('exit', (code: number) => reject(new Error(`the model's thread ended (exit ${code})`)));
      on('message', (m: Handshake) =>
        m.type === 'ready' ? resolve(m) : reject(new Error(m.error)),
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
    return new SerialSession(thread, ready.side, ready.maxBatch, opts.onRun ?? (() => {}), warn);
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
      const request: Request = { items };
      this.thread.postMessage(
        request,
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
