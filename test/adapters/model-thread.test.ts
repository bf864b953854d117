import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkerOptions } from 'node:worker_threads';
import { EfficientNetEmbedder } from '../../src/adapters/embedders/efficientnet';
import { SerialSession, threadFile } from '../../src/adapters/embedders/serial-session';
import { meanColourModel } from '../helpers/onnx-model';

// Every thread this file starts, as it was asked for.
const mockStarted: Array<{ filename: unknown; options?: WorkerOptions }> = [];
jest.mock('node:worker_threads', () => {
  const actual = jest.requireActual<typeof import('node:worker_threads')>('node:worker_threads');
  class RecordingWorker extends actual.Worker {
    constructor(filename: string | URL, options?: WorkerOptions) {
      super(filename, options);
      mockStarted.push({ filename, options });
    }
  }
  return { ...actual, Worker: RecordingWorker };
});

const SOURCE_DIR = path.join(__dirname, '../../src/adapters/embedders');

test('the thread runs the model-thread module from a file, not code given as a string', async () => {
  mockStarted.length = 0;
  const session = await SerialSession.create(meanColourModel(8), { threads: 1 });
  try {
    expect(await session.run(new Float32Array(3 * 8 * 8).fill(0.5))).toHaveLength(3);
    expect(mockStarted).toHaveLength(1);
    const { filename, options } = mockStarted[0]!;
    expect(options?.eval).toBeFalsy();
    // from src/ there is no compiled sibling: the module is transpiled from its source
    expect(fs.existsSync(path.join(SOURCE_DIR, 'model-thread.js'))).toBe(false);
    expect(filename).toBe(await threadFile(SOURCE_DIR));
    const code = fs.readFileSync(filename as string, 'utf8');
    expect(code).toContain('model-thread runs as a worker thread');
    expect(code).toContain("allow_spinning: '0'");
    // and again only when the source changes
    const written = fs.statSync(filename as string).mtimeMs;
    await SerialSession.create(meanColourModel(8), { threads: 1 }).then((s) => s.close());
    expect(mockStarted[1]!.filename).toBe(filename);
    expect(fs.statSync(filename as string).mtimeMs).toBe(written);
  } finally {
    await session.close();
  }
});

test('built (dist/), the thread starts from the compiled sibling', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-model-thread-'));
  try {
    fs.writeFileSync(path.join(dir, 'model-thread.js'), '');
    expect(await threadFile(dir)).toBe(path.join(dir, 'model-thread.js'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * onnxruntime-node's run is synchronous under its promise: on the main thread each image held
 * the event loop (and every HTTP request of the process) for the whole inference. The model
 * runs on a thread of its own.
 */
test('the model runs on its own thread: the event loop keeps turning during inference', async () => {
  const model = await EfficientNetEmbedder.load({ threads: 1 });
  try {
    const pixels = () => ({ data: new Uint8Array(224 * 224 * 3).fill(128), size: 224 });
    await model.embed(pixels()); // warm-up
    const runs = 6;
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 1);
    // One image a run, one after another: asked together they would share one short batched run
    // (the loop then had a single run's time to turn in, and a loaded machine let it tick once).
    for (let i = 0; i < runs; i++) await model.embed(pixels());
    clearInterval(ticker);
    // On the main thread the loop turned once between runs at most (onnxruntime-node's
    // setImmediate): a timer could fire about once a run. A run takes 10–60 ms here.
    expect(ticks).toBeGreaterThan(3 * runs);
  } finally {
    await model.close();
  }
});

test('a closed model refuses runs instead of hanging them', async () => {
  const model = await EfficientNetEmbedder.load({ threads: 1 });
  await model.close();
  await expect(model.embed({ data: new Uint8Array(224 * 224 * 3), size: 224 })).rejects.toThrow(
    /thread ended/,
  );
});

test('images asked for together share a run and get what they would get alone', async () => {
  const runs: number[] = [];
  // the cores' threads, as the service runs it: a batch's convolutions are split differently
  const model = await EfficientNetEmbedder.load({ onRun: (n) => runs.push(n) });
  try {
    // distinct images, so a row returned to the wrong caller would show
    const pixels = (k: number) => ({
      data: new Uint8Array(224 * 224 * 3).map((_, i) => (i * (k + 3) + k * 41) % 256),
      size: 224,
    });
    const n = 6;
    const alone: Float32Array[] = [];
    for (let k = 0; k < n; k++) alone.push(await model.embed(pixels(k)));
    expect(runs).toEqual(Array(n).fill(1));
    runs.length = 0;
    const together = await Promise.all(Array.from({ length: n }, (_, k) => model.embed(pixels(k))));
    expect(runs).toEqual([n]);
    // bit for bit: no operation of the graph mixes the images of a batch
    together.forEach((v, k) =>
      expect(Buffer.from(v.buffer)).toEqual(Buffer.from(alone[k]!.buffer)),
    );
  } finally {
    await model.close();
  }
});

test('images that arrive while a run is busy go together in the next, at most maxBatch', async () => {
  const runs: number[] = [];
  const model = await EfficientNetEmbedder.load({
    threads: 1,
    maxBatch: 3,
    onRun: (n) => runs.push(n),
  });
  try {
    expect(model.maxBatch).toBe(3);
    const pixels = () => ({ data: new Uint8Array(224 * 224 * 3).fill(90), size: 224 });
    const first = model.embed(pixels());
    // asked for one at a time, each on a later turn, while the first run is busy
    const later: Array<Promise<Float32Array>> = [];
    for (let k = 0; k < 7; k++) {
      await new Promise((r) => setImmediate(r));
      later.push(model.embed(pixels()));
    }
    await Promise.all([first, ...later]);
    expect(runs.reduce((a, b) => a + b, 0)).toBe(8);
    expect(Math.max(...runs)).toBeLessThanOrEqual(3);
    expect(runs.length).toBeLessThan(8);
  } finally {
    await model.close();
  }
});
