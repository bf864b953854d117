/**
 * The model's thread: SerialSession (serial-session.ts) starts this module as a worker thread,
 * which loads the ONNX session and runs the images it is sent, so that onnxruntime-node's
 * synchronous runs block this thread instead of the process's event loop.
 *
 * Batching: images that arrive while a run is busy wait in `queue` and go together in the next
 * run (at most `maxBatch`). A lone image is run at once, so batching adds no latency of its
 * own; it only gathers what concurrent jobs and lens requests have already queued.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { Handshake, Item, Reply, Request, ThreadData } from './model-thread-protocol';

if (!parentPort) throw new Error('model-thread runs as a worker thread (serial-session.ts)');
const port = parentPort;
const options = workerData as ThreadData;

const post = (m: Handshake | Reply, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);
const reason = (e: unknown) =>
  String((e as { message?: unknown } | null | undefined)?.message || e);

type Shape = ReadonlyArray<number | string> | undefined;
const shapeOf = (meta: ort.InferenceSession.ValueMetadata | undefined): Shape =>
  meta?.isTensor ? meta.shape : undefined;
const fixed = (shape: Shape) =>
  shape && typeof shape[0] === 'number' && shape[0] > 0 ? shape[0] : undefined;

async function start(): Promise<void> {
  const session = await ort.InferenceSession.create(options.model, {
    intraOpNumThreads: options.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // Pool threads that spin after a run (ONNX Runtime's default, for back-to-back runs) take
    // the cores from sharp's decoding and the store, which do more images a second without it.
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  });
  const inShape = shapeOf(session.inputMetadata?.[0]);
  const outShape = shapeOf(session.outputMetadata?.[0]);
  // several images a run only when the input's and the first output's first dimension are free
  let maxBatch =
    fixed(inShape) === undefined && fixed(outShape) === undefined ? options.maxBatch : 1;
  const batchable = fixed(inShape) === undefined || fixed(inShape) === 1;
  const side = inShape && typeof inShape[3] === 'number' && inShape[3] > 0 ? inShape[3] : 224;
  const input = session.inputNames[0];
  const output = session.outputNames[0];

  const run = async (group: Array<Pick<Item, 'input'>>, size: number) => {
    const n = group.length;
    const len = group[0].input.length;
    let data = group[0].input;
    if (n > 1) {
      data = new Float32Array(n * len);
      group.forEach((g, i) => data.set(g.input, i * len));
    }
    const tensor = new ort.Tensor('float32', data, [n, 3, size, size]);
    const out = (await session.run({ [input]: tensor }))[output];
    // a numeric typed array: Float32Array.from below converts another number type
    const values = out.data as Float32Array;
    // one row per image, or the rows cannot be told apart (one image: any shape, flattened)
    if (n > 1 && (out.dims[0] !== n || values.length % n))
      throw new Error(`the first output has shape [${out.dims.join(', ')}] for ${n} images`);
    const per = values.length / n;
    return group.map((_, i) => Float32Array.from(values.subarray(i * per, (i + 1) * per)));
  };

  // A model can declare a free batch dimension and still not take a batch (a reshape to one
  // image, a statistic over the batch): two images run together must come back as each does
  // alone, or the model is given one image a run. Undefined when batches are fine.
  const probe = async (): Promise<string | undefined> => {
    const len = 3 * side * side;
    // one image below zero and one above: mixed rows differ even for a model that only averages
    const images = [-1, 1].map((sign) => ({
      input: Float32Array.from({ length: len }, (_, i) => sign * (0.25 + ((i * 7) % 64) / 128)),
    }));
    let alone: Float32Array[];
    try {
      alone = [(await run([images[0]], side))[0], (await run([images[1]], side))[0]];
    } catch {
      return undefined; // not a batching matter: the service's own runs will report it
    }
    try {
      const together = await run(images, side);
      const same = together.every(
        (v, k) =>
          v.length === alone[k].length &&
          v.every((x, i) => Math.abs(x - alone[k][i]) <= 1e-4 * (1 + Math.abs(alone[k][i]))),
      );
      return same ? undefined : 'two images run together did not come back as each does alone';
    } catch (e) {
      return reason(e);
    }
  };

  const send = (g: Item, data: Float32Array, batch: number) =>
    post({ type: 'result', id: g.id, data, batch }, [data.buffer as ArrayBuffer]);
  const queue: Item[] = [];
  let busy = false;
  const drain = async () => {
    while (queue.length) {
      const group = queue.splice(0, maxBatch);
      let rows: Float32Array[];
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
              post({ type: 'degraded', reason: reason(e) });
            }
            send(g, row, 1);
          } catch (err) {
            post({ type: 'error', id: g.id, error: reason(err) });
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
  port.on('message', (m: Request) => {
    for (const item of m.items) queue.push(item);
    if (busy) return;
    busy = true;
    // after the messages already delivered in this turn, so they are run together; a rejection
    // here is a bug, and ends the thread, which fails every pending run on the main side
    setImmediate(() => void drain());
  });

  const degraded = maxBatch > 1 && batchable ? await probe() : undefined;
  if (degraded) maxBatch = 1;
  post({ type: 'ready', side, maxBatch, batchable, degraded });
}

start().catch((e: unknown) => post({ type: 'failed', error: reason(e) }));
