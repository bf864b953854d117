/**
 * @jest-environment ./test/setup/native-typed-arrays-env.js
 */
import fs from 'node:fs';
import path from 'node:path';
import { OnnxEmbedder } from '../../src/adapters/embedders/onnx';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { setupDataset, startTestApp, tempDir, waitProcessed } from '../helpers/app';
import { makeImage, startImageServer } from '../helpers/image-server';
import { meanColourModel } from '../helpers/onnx-model';

const modelFile = (size = 16) => {
  const file = path.join(tempDir('vss-onnx-'), 'model.onnx');
  fs.writeFileSync(file, meanColourModel(size));
  return file;
};

test('loads a model: input size, dimensions and a content-derived id', async () => {
  const file = modelFile(16);
  const e = await OnnxEmbedder.load(file);
  expect(e.inputSize).toBe(16);
  expect(e.dimensions).toBe(3);
  expect(e.id).toMatch(/^onnx-[0-9a-f]{12}$/);
  expect((await OnnxEmbedder.load(file)).id).toBe(e.id);
  expect((await OnnxEmbedder.load(modelFile(8))).id).not.toBe(e.id);
});

test('embeds through the image pipeline: normalised model output', async () => {
  const e = await OnnxEmbedder.load(modelFile(16));
  const analyzer = new SharpImageAnalyzer(e);
  const f = await analyzer.analyze(await makeImage(3));
  expect(f.embedder).toBe(e.id);
  expect(f.vector).toHaveLength(3);
  expect(Math.hypot(...f.vector)).toBeCloseTo(1, 5);
  // a solid red square: its CLIP-normalised mean colour, normalised
  const red = new Uint8Array(16 * 16 * 3).map((_, i) => (i % 3 === 0 ? 255 : 0));
  const v = await e.embed({ data: red, size: 16 });
  const expected = [
    (1 - 0.48145466) / 0.26862954,
    (0 - 0.4578275) / 0.26130258,
    (0 - 0.40821073) / 0.27577711,
  ];
  const n = Math.hypot(...expected);
  expected.forEach((x, i) => expect(v[i]).toBeCloseTo(x / n, 4));
});

test('a missing or broken model file fails with a message naming the variable', async () => {
  await expect(OnnxEmbedder.load('/nonexistent/model.onnx')).rejects.toThrow(
    /EMBEDDER_MODEL_PATH: cannot read/,
  );
  const junk = path.join(tempDir('vss-onnx-'), 'junk.onnx');
  fs.writeFileSync(junk, 'not a model');
  await expect(OnnxEmbedder.load(junk)).rejects.toThrow(/not a usable ONNX model/);
});

test('the service runs on EMBEDDER=onnx: images are embedded by the model', async () => {
  const img = await startImageServer();
  const file = path.join(tempDir('vss-onnx-'), 'model.onnx');
  fs.writeFileSync(file, meanColourModel(16, 'batch'));
  // a model that could take many images a run, held to one by the setting
  const t = await startTestApp({
    EMBEDDER: 'onnx',
    EMBEDDER_MODEL_PATH: file,
    EMBEDDER_BATCH: '1',
    WORKER_CONCURRENCY: '8',
  });
  try {
    const ds = await setupDataset(t, 'onnxorg', 'd');
    const n = 12;
    await t.call('POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: {
        content: Array.from({ length: n }, (_, i) => ({
          id: i ? `x${i}` : 'a',
          url: `${img.url}/img/${i + 1}.png`,
        })),
      },
    });
    await waitProcessed(t, ds.base, ds.orgToken, n);
    const runs = (await t.app.container.services.metrics.embedderRunImages.get()).values;
    const count = runs.find((v) => v.metricName === 'embedder_run_images_count')?.value;
    const sum = runs.find((v) => v.metricName === 'embedder_run_images_sum')?.value;
    expect(sum).toBeGreaterThanOrEqual(n); // and the load's probe
    expect(count).toBe(sum);
    const stored = await t.app.container.ports.accounts.getDataset('onnxorg', 'd');
    const e = await t.app.container.ports.content.getEmbedding(stored!.id, 'a');
    expect(e?.embedder).toBe(t.app.container.embedder.id);
    expect(e?.vector).toHaveLength(3);
  } finally {
    await t.stop();
    await img.close();
  }
});

describe('runs of several images', () => {
  const solid = (rgb: [number, number, number]) =>
    new Uint8Array(16 * 16 * 3).map((_, i) => rgb[i % 3]!);
  const colours: Array<[number, number, number]> = [
    [255, 0, 0],
    [0, 255, 0],
    [0, 0, 255],
    [200, 200, 0],
    [0, 120, 240],
    [90, 90, 90],
  ];
  const load = async (
    batch: number | string,
    kind?: Parameters<typeof meanColourModel>[2],
    maxBatch?: number,
  ) => {
    const file = path.join(tempDir('vss-onnx-'), 'model.onnx');
    fs.writeFileSync(file, meanColourModel(16, batch, kind));
    const runs: number[] = [];
    const e = await OnnxEmbedder.load(file, { onRun: (n) => runs.push(n), maxBatch });
    runs.length = 0; // the load's own probes
    return { e, runs };
  };
  const embedAll = (e: OnnxEmbedder) =>
    Promise.all(colours.map((c) => e.embed({ data: solid(c), size: 16 })));

  test('a symbolic batch dimension: images asked for together share a run, each row its own', async () => {
    const { e, runs } = await load('batch');
    try {
      expect(e.maxBatch).toBe(8);
      const alone: Float32Array[] = [];
      for (const c of colours) alone.push(await e.embed({ data: solid(c), size: 16 }));
      expect(runs).toEqual(colours.map(() => 1));
      runs.length = 0;
      const together = await embedAll(e);
      expect(runs).toEqual([colours.length]);
      // the rows come back to the images they belong to, the same as when run alone
      together.forEach((v, i) => expect(Array.from(v)).toEqual(Array.from(alone[i]!)));
    } finally {
      await e.close();
    }
  });

  test('a run takes at most maxBatch images', async () => {
    const { e, runs } = await load('batch', 'mean', 4);
    try {
      await embedAll(e);
      expect(runs).toEqual([4, 2]);
    } finally {
      await e.close();
    }
  });

  test('a model fixed at one image a run is given one at a time', async () => {
    const { e, runs } = await load(1);
    try {
      expect(e.maxBatch).toBe(1);
      const v = await embedAll(e);
      expect(runs).toEqual(colours.map(() => 1));
      expect(v[0]![0]).toBeGreaterThan(v[1]![0]!);
    } finally {
      await e.close();
    }
  });

  test('a model fixed at several images a run is refused at load, with the reason', async () => {
    await expect(load(4)).rejects.toThrow(
      /not a usable ONNX model: .*fixed batch of more than one/,
    );
  });

  test('a model that declares a free batch but gives one row back: runs of one from then on', async () => {
    const warned = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const { e, runs } = await load('batch', 'pools-the-batch');
      try {
        // found by the load's probe: its batch of two failed and each image ran alone
        expect(e.maxBatch).toBe(1);
        expect(String(warned.mock.calls[0]?.[0])).toMatch(
          /first output has shape \[1, 3, 1, 1\] for 2 images/,
        );
        const v = await embedAll(e);
        expect(runs).toEqual(colours.map(() => 1));
        expect(v.map((x) => x.length)).toEqual(colours.map(() => 3));
        expect(v[0]![0]).toBeGreaterThan(v[1]![0]!);
      } finally {
        await e.close();
      }
    } finally {
      warned.mockRestore();
    }
  });

  test('a batch that fails after start-up is run one image at a time, then batches stop', async () => {
    const warnings: string[] = [];
    const file = path.join(tempDir('vss-onnx-'), 'model.onnx');
    fs.writeFileSync(file, meanColourModel(16, 'batch', 'keeps-two-rows'));
    const runs: number[] = [];
    const e = await OnnxEmbedder.load(file, {
      onRun: (n) => runs.push(n),
      onWarning: (m) => warnings.push(m),
    });
    try {
      // two images together come back right, so the start-up probe lets batches through
      expect(e.maxBatch).toBe(8);
      expect(warnings).toEqual([]);
      runs.length = 0;
      const alone: Float32Array[] = [];
      for (const c of colours) alone.push(await e.embed({ data: solid(c), size: 16 }));
      runs.length = 0;
      // six at once: the model gives two rows back, the batch fails, each image runs alone
      const v = await embedAll(e);
      v.forEach((x, i) => expect(Array.from(x)).toEqual(Array.from(alone[i]!)));
      expect(runs).toEqual(colours.map(() => 1));
      expect(warnings).toEqual([
        expect.stringMatching(/first output has shape \[2, 3\] for 6 images.*one image a run/),
      ]);
      expect(e.maxBatch).toBe(1);
      runs.length = 0;
      await embedAll(e);
      expect(runs).toEqual(colours.map(() => 1));
    } finally {
      await e.close();
    }
  });

  test('a model whose images change each other in a batch is run one image at a time', async () => {
    const { e, runs } = await load('batch', 'adds-the-batch-mean');
    try {
      expect(e.maxBatch).toBe(1);
      const v = await embedAll(e);
      expect(runs).toEqual(colours.map(() => 1));
      // alone, the batch's mean is the image's own: twice its mean colour, normalised
      const red = [1, -0.4578275 / 0.26130258, -0.40821073 / 0.27577711];
      red[0] = (1 - 0.48145466) / 0.26862954;
      const n = Math.hypot(...red);
      red.forEach((x, i) => expect(v[0]![i]).toBeCloseTo(x / n, 4));
    } finally {
      await e.close();
    }
  });

  test('maxBatch must be a whole number of images', async () => {
    await expect(load('batch', 'mean', 0)).rejects.toThrow(/maxBatch must be a whole number/);
    await expect(load('batch', 'mean', Number.NaN)).rejects.toThrow(/maxBatch must be a whole/);
  });
});
