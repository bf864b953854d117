import os from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * The model's thread. onnxruntime-node's `run` is synchronous underneath its promise (it only
 * waits for setImmediate: microsoft/onnxruntime#19611, #26968), so on the main thread every
 * image held the event loop for the whole inference: 62 % of a worker process's main thread in
 * a CPU profile of bench:ingest, with every HTTP request, fetch and store write waiting behind
 * it. Here the session lives on a thread of its own and blocks only that thread. The code is
 * given as source (`eval`), so the same module runs from src/ under the tests and from dist/.
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
  parentPort.postMessage({ ready: true, side: meta && meta.shape ? meta.shape[3] : undefined });
  // Runs one at a time: the native run is synchronous on this thread.
  parentPort.on('message', async ({ id, input, size }) => {
    try {
      const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input, [1, 3, size, size]) };
      const out = (await session.run(feeds))[session.outputNames[0]];
      const data = Float32Array.from(out.data);
      parentPort.postMessage({ id, data }, [data.buffer]);
    } catch (e) {
      parentPort.postMessage({ id, error: String((e && e.message) || e) });
    }
  });
}, (e) => parentPort.postMessage({ failed: String((e && e.message) || e) }));
`;

type Reply = { id: number; data?: Float32Array; error?: string };
type Listener = Parameters<Worker['off']>[1];

/**
 * One ONNX session per process, shared by worker jobs and lens requests. Runs are serialised,
 * each on the model's own thread pool (`threads`, default: the machine's cores), so worker
 * concurrency never makes two runs compete for the cores. The shipped model takes one image
 * per run; batching several was measured at about 10 % per image and not kept
 * (docs/embedders.md).
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
  ) {
    thread.on('message', (m: Reply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (!this.pending.size) thread.unref();
      if (m.data) p.resolve(m.data);
      else p.reject(new Error(`model run failed: ${m.error}`));
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

  static async create(
    model: Uint8Array,
    threads = os.availableParallelism(),
  ): Promise<SerialSession> {
    const thread = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: { ort: require.resolve('onnxruntime-node'), model, threads },
    });
    // (listeners taken off one by one: the Worker keeps internal ones of its own)
    const listeners: Array<[string, Listener]> = [];
    const side = await new Promise<unknown>((resolve, reject) => {
      const on = (event: string, f: Listener) => {
        listeners.push([event, f]);
        thread.on(event, f);
      };
      on('error', reject);
      on('exit', (code: number) => reject(new Error(`the model's thread ended (exit ${code})`)));
      on('message', (m: { ready?: boolean; side?: unknown; failed?: string }) =>
        m.ready ? resolve(m.side) : reject(new Error(m.failed ?? 'the model did not load')),
      );
    })
      .catch(async (e: unknown) => {
        await thread.terminate();
        throw e;
      })
      .finally(() => {
        for (const [event, f] of listeners) thread.off(event, f);
      });
    return new SerialSession(thread, typeof side === 'number' && side > 0 ? side : 224);
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
