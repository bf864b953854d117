/**
 * @jest-environment ./test/setup/native-typed-arrays-env.js
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import {
  createEmbedder,
  hybridId,
  hybridWeights,
  HYBRID_SHARES,
} from '../../src/adapters/embedders';
import {
  EFFICIENTNET_MODELS,
  EFFICIENTNET_SHA256,
  EfficientNetEmbedder,
} from '../../src/adapters/embedders/efficientnet';
import { areaResize } from '../../src/adapters/embedders/area-resize';
import { DESCRIPTOR_BLOCKS, DescriptorEmbedder } from '../../src/adapters/embedders/descriptor';
import { SharpImageAnalyzer } from '../../src/adapters/images/sharp-analyzer';
import { loadConfig } from '../../src/config/env';
import { tempDir } from '../helpers/app';

/**
 * The learned embedder (issue 16): the committed model is the one its checksum names, its
 * vectors for fixed images stay what they were (golden file; `UPDATE_GOLDEN=1` rewrites it
 * after an intended change), and the hybrid default and the descriptor are both selectable.
 */
const REPO = path.join(__dirname, '../..');
const GOLDEN = path.join(__dirname, '../fixtures/embeddings/efficientnet-lite0.json');

/** Deterministic test images: encoded from pixels computed here (no fonts, no SVG). */
async function fixtures(): Promise<Record<string, Buffer>> {
  const side = 160;
  const make = (f: (x: number, y: number) => [number, number, number]) => {
    const px = Buffer.alloc(side * side * 3);
    for (let y = 0; y < side; y++)
      for (let x = 0; x < side; x++) px.set(f(x, y), (y * side + x) * 3);
    return sharp(px, { raw: { width: side, height: side, channels: 3 } })
      .png()
      .toBuffer();
  };
  return {
    gradient: await make((x, y) => [x + 40, y + 40, 200 - x]),
    disc: await make((x, y) =>
      (x - 80) ** 2 + (y - 80) ** 2 < 50 ** 2 ? [210, 30, 40] : [245, 245, 240],
    ),
    checks: await make((x, y) => (((x >> 4) + (y >> 4)) % 2 ? [20, 20, 20] : [230, 230, 230])),
  };
}

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

test('each committed model is the one models/efficientnet-lite0/SHA256 names', () => {
  const lines = fs.readFileSync(EFFICIENTNET_SHA256, 'utf8').trim().split('\n');
  expect(lines).toHaveLength(2);
  for (const file of Object.values(EFFICIENTNET_MODELS)) {
    const got = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    expect(lines).toContain(`${got}  ${path.basename(file)}`);
  }
});

/**
 * The build-context files the final stage of a Dockerfile copies, by the image directory they
 * land in: the image that ships is the last stage, and `--from` copies come from other stages.
 */
function imageFiles(dockerfile: string): Map<string, string[]> {
  const lines = dockerfile.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  const last = lines.findLastIndex((l) => /^\s*FROM\s/i.test(l));
  const out = new Map<string, string[]>();
  for (const line of lines.slice(last + 1)) {
    const words = line.trim().split(/\s+/);
    if (words[0]?.toUpperCase() !== 'COPY' || words.some((w) => w.startsWith('--from'))) continue;
    const args = words.slice(1).filter((w) => !w.startsWith('--'));
    const dest = args.pop()!;
    for (const src of args) {
      const isDir = fs.statSync(path.join(REPO, src)).isDirectory();
      // a lone file copied to a destination without a trailing slash is renamed to it
      const into = path.posix
        .normalize(isDir || args.length > 1 || dest.endsWith('/') ? dest : path.posix.dirname(dest))
        .replace(/(.)\/$/, '$1');
      const files = isDir
        ? fs.readdirSync(path.join(REPO, src)).map((f) => path.posix.join(src, f))
        : [src];
      out.set(into, [...(out.get(into) ?? []), ...files]);
    }
  }
  return out;
}

test('the Docker image carries the model with its licence and modification notice (Apache-2.0 §4)', () => {
  const copied = imageFiles(fs.readFileSync(path.join(REPO, 'Dockerfile'), 'utf8'));
  const model = path.relative(REPO, EFFICIENTNET_MODELS.float32).split(path.sep).join('/');
  const dir = [...copied].find(([, files]) => files.includes(model))?.[0];
  expect(dir).toBeDefined();
  const beside = copied.get(dir!)!.map((f) => path.posix.basename(f));
  expect(beside).toEqual(
    expect.arrayContaining([
      'efficientnet-lite0.onnx',
      'efficientnet-lite0-int8.onnx',
      'SHA256',
      'LICENSE',
      'README.md',
    ]),
  );
  expect(
    fs.readFileSync(path.join(path.dirname(EFFICIENTNET_MODELS.float32), 'LICENSE'), 'utf8'),
  ).toMatch(/Apache License/);
  expect(
    fs.readFileSync(path.join(path.dirname(EFFICIENTNET_MODELS.float32), 'README.md'), 'utf8'),
  ).toMatch(/modified/);
});

test('a model file with other bytes is refused at start, naming the script that rebuilds it', async () => {
  const copy = path.join(tempDir('vss-model-'), 'model.onnx');
  const bytes = fs.readFileSync(EFFICIENTNET_MODELS.float32);
  bytes[bytes.length - 1] ^= 1;
  fs.writeFileSync(copy, bytes);
  await expect(EfficientNetEmbedder.load({ file: copy })).rejects.toThrow(
    /convert_efficientnet_lite0\.py/,
  );
  // the float model is not the quantised one either
  await expect(
    EfficientNetEmbedder.load({ precision: 'int8', file: EFFICIENTNET_MODELS.float32 }),
  ).rejects.toThrow(/quantize_efficientnet_lite0\.py/);
});

test('the int8 model: its own id, vectors close to the float ones, pictures still apart', async () => {
  const images = await fixtures();
  const vectors = async (precision: 'float32' | 'int8') => {
    const model = await EfficientNetEmbedder.load({ precision, threads: 1 });
    const analyzer = new SharpImageAnalyzer(model);
    const out: Record<string, number[]> = {};
    for (const [name, bytes] of Object.entries(images)) {
      const f = await analyzer.analyze(bytes);
      expect(f.embedder).toBe(
        precision === 'int8' ? 'efficientnet-lite0-int8-v1' : 'efficientnet-lite0-v1',
      );
      out[name] = f.vector;
    }
    await model.close();
    return out;
  };
  const float = await vectors('float32');
  const int8 = await vectors('int8');
  for (const name of Object.keys(float)) {
    expect(Math.hypot(...int8[name]!)).toBeCloseTo(1, 5);
    const same = cosine(int8[name]!, float[name]!);
    expect(same).toBeGreaterThan(0.9);
    expect(same).toBeLessThan(0.99999);
    // nearer the float vector of its own picture than to any other picture's
    for (const other of Object.keys(float))
      if (other !== name) expect(cosine(int8[name]!, float[other]!)).toBeLessThan(same);
  }
  expect(cosine(int8.disc!, int8.checks!)).toBeLessThan(0.9);
}, 30_000);

test('EfficientNet-Lite0 vectors of fixed images match the golden file', async () => {
  const analyzer = new SharpImageAnalyzer(await EfficientNetEmbedder.load({ threads: 1 }));
  const got: Record<string, number[]> = {};
  for (const [name, bytes] of Object.entries(await fixtures())) {
    const f = await analyzer.analyze(bytes);
    expect(f.embedder).toBe('efficientnet-lite0-v1');
    got[name] = f.vector.map((x) => Math.round(x * 1e5) / 1e5);
  }
  if (process.env.UPDATE_GOLDEN || !fs.existsSync(GOLDEN)) {
    if (!process.env.UPDATE_GOLDEN)
      throw new Error(`${GOLDEN} is missing; run with UPDATE_GOLDEN=1`);
    fs.mkdirSync(path.dirname(GOLDEN), { recursive: true });
    fs.writeFileSync(GOLDEN, JSON.stringify(got) + '\n');
  }
  const golden = JSON.parse(fs.readFileSync(GOLDEN, 'utf8')) as Record<string, number[]>;
  expect(Object.keys(got).sort()).toEqual(Object.keys(golden).sort());
  for (const name of Object.keys(golden)) {
    expect(got[name]).toHaveLength(1280);
    expect(cosine(got[name]!, golden[name]!)).toBeGreaterThan(0.9999);
    expect(Math.max(...got[name]!.map((x, i) => Math.abs(x - golden[name]![i]!)))).toBeLessThan(
      2e-3,
    );
  }
  // different pictures give clearly different vectors
  expect(cosine(got.disc!, got.checks!)).toBeLessThan(0.9);
}, 30_000);

test('the hybrid default: every block, unit length, an id that names its shares', async () => {
  expect(loadConfig({}).EMBEDDER).toBe('hybrid');
  const hybrid = await createEmbedder('hybrid', { threads: 1 });
  expect(hybrid.id).toBe(hybridId(HYBRID_SHARES));
  expect(hybrid.id).toBe('hybrid-c22.5l15o0q7.5e55-v1');
  const quarters = { colour: 1, layout: 1, orientation: 0, cellOrientation: 0, efficientnet: 2 };
  expect(hybridId(quarters)).toBe('hybrid-c25l25o0q0e50-v1');
  expect(hybridId(HYBRID_SHARES, 'int8')).toBe('hybrid-c22.5l15o0q7.5e55-int8-v1');
  expect(loadConfig({}).EMBEDDER_PRECISION).toBe('float32');
  const int8 = await createEmbedder('hybrid', { threads: 1, precision: 'int8' });
  expect(int8.id).toBe('hybrid-c22.5l15o0q7.5e55-int8-v1');
  // its descriptor part is made from the decode shrunk by area averaging
  const pixels = {
    data: new Uint8Array(224 * 224 * 3).map((_, i) => (i * 7 + (i >> 9)) & 255),
    size: 224,
  };
  const fromArea = new DescriptorEmbedder(hybridWeights(HYBRID_SHARES).descriptor).embedSync(
    areaResize(pixels, 64),
  );
  const part = (await int8.embed(pixels)).slice(0, 140);
  const unit = (v: Float32Array) => Array.from(v, (x) => x / Math.hypot(...v));
  expect(cosine(unit(part), unit(fromArea))).toBeCloseTo(1, 6);
  await int8.close?.();
  expect([hybrid.dimensions, hybrid.inputSize]).toEqual([140 + 1280, 224]);
  const f = await new SharpImageAnalyzer(hybrid).analyze((await fixtures()).disc!);
  expect(f.vector).toHaveLength(1420);
  expect(Math.hypot(...f.vector)).toBeCloseTo(1, 5);
  // each block's length squared is its share of the cosine
  const length = (from: number, to: number) => Math.hypot(...f.vector.slice(from, to));
  for (const [block, [from, to]] of Object.entries(DESCRIPTOR_BLOCKS))
    expect(length(from, to) ** 2).toBeCloseTo(
      HYBRID_SHARES[block as keyof typeof HYBRID_SHARES],
      5,
    );
  expect(length(140, 1420) ** 2).toBeCloseTo(HYBRID_SHARES.efficientnet, 5);
});

test('the descriptor stays selectable for the fastest ingest', async () => {
  expect(loadConfig({ EMBEDDER: 'descriptor' }).EMBEDDER).toBe('descriptor');
  const d = await createEmbedder('descriptor');
  expect([d.id, d.dimensions]).toEqual(['descriptor-v1', 140]);
  expect(() => loadConfig({ EMBEDDER: 'clip' })).toThrow(/EMBEDDER/);
  expect(() => loadConfig({ EMBEDDER_PRECISION: 'int4' })).toThrow(/EMBEDDER_PRECISION/);
  expect(loadConfig({ EMBEDDER: 'descriptor', EMBEDDER_PRECISION: 'int8' }).ignored).toEqual([
    expect.stringMatching(/EMBEDDER_PRECISION/),
  ]);
});
