#!/usr/bin/env node
// Checks models/efficientnet-lite0/efficientnet-lite0.onnx (or --model FILE) with onnxruntime-node.
//
//   node scripts/model/check-model.mjs [options] IMAGE|DIR...
//
// For each image: shorter side resized to 224 and centre-cropped (sharp, fit "cover"), RGB,
// (p - 127) / 128, NCHW; prints the top-5 ImageNet classes (softmax of the `logits` output),
// the dimension and L2 norm of the `embedding` output (first output) and the inference time.
//
// Options:
//   --model FILE          the .onnx to check
//   --labels FILE         ImageNet class names: JSON array or {"0": "tench, ...", ...}
//   --runs N              timed runs per image after one warm-up run (default 5; median shown)
//   --threads N           onnxruntime intra-op threads (default: onnxruntime's, one per core)
//   --norm lite|clip      input normalisation: lite = (p - 127) / 128 (the model's own, default);
//                         clip = CLIP mean/std as src/adapters/embedders/onnx.ts applies (to
//                         measure what a mismatched normalisation does)
//   --dump-dir DIR        also write each preprocessed input as DIR/<image name>.f32 (raw
//                         float32 NCHW), for convert_efficientnet_lite0.py --reference-dir DIR
//   --reference-dir DIR   compare the model's outputs on every DIR/<name>.f32 with the float64
//                         numpy reference in DIR/<name>.ref.json; exit 1 when they differ
//   --expect IDX          exit 1 unless every image's top-1 class is one of the comma-separated
//                         indices (smoke test)
//
// Exits 1 on any failed check.
import { Buffer } from 'node:buffer';
import console from 'node:console';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';
import sharp from 'sharp';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SIZE = 224;
const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD = [0.26862954, 0.26130258, 0.27577711];
// A few ImageNet-1k classes, for output without --labels.
const KNOWN = {
  388: 'giant panda',
  924: 'guacamole',
  925: 'consomme',
  926: 'hot pot',
  927: 'trifle',
  928: 'ice cream',
  930: 'French loaf',
  931: 'bagel',
  932: 'pretzel',
  933: 'cheeseburger',
  934: 'hotdog',
  935: 'mashed potato',
  936: 'head cabbage',
  937: 'broccoli',
  938: 'cauliflower',
  939: 'zucchini',
  940: 'spaghetti squash',
  941: 'acorn squash',
  942: 'butternut squash',
  943: 'cucumber',
  944: 'artichoke',
  945: 'bell pepper',
  946: 'cardoon',
  947: 'mushroom',
  948: 'Granny Smith',
  949: 'strawberry',
  950: 'orange',
  951: 'lemon',
  952: 'fig',
  953: 'pineapple',
  954: 'banana',
  955: 'jackfruit',
  956: 'custard apple',
  957: 'pomegranate',
  959: 'carbonara',
  960: 'chocolate sauce',
  961: 'dough',
  962: 'meat loaf',
  963: 'pizza',
  964: 'potpie',
  965: 'burrito',
  967: 'espresso',
  987: 'corn',
  998: 'ear',
};

function parseArgs(argv) {
  const o = {
    model: path.join(REPO, 'models/efficientnet-lite0/efficientnet-lite0.onnx'),
    runs: 5,
    norm: 'lite',
    inputs: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--model') o.model = next();
    else if (a === '--labels') o.labels = next();
    else if (a === '--runs') o.runs = Math.max(1, Number(next()));
    else if (a === '--threads') o.threads = Math.max(1, Number(next()));
    else if (a === '--norm') o.norm = next();
    else if (a === '--dump-dir') o.dumpDir = next();
    else if (a === '--reference-dir') o.refDir = next();
    else if (a === '--expect') o.expect = next().split(',').map(Number);
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else o.inputs.push(a);
  }
  if (!['lite', 'clip'].includes(o.norm)) throw new Error('--norm is lite or clip');
  return o;
}

function loadLabels(file) {
  if (!file) return (i) => KNOWN[i] ?? '';
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  const arr = Array.isArray(j) ? j : Array.from({ length: 1000 }, (_, i) => j[String(i)]);
  return (i) => String(Array.isArray(arr[i]) ? arr[i].at(-1) : (arr[i] ?? '')).split(',')[0];
}

function listImages(inputs) {
  const out = [];
  for (const p of inputs) {
    if (fs.statSync(p).isDirectory())
      for (const f of fs.readdirSync(p).sort())
        if (/\.(jpe?g|png|webp|gif|tiff?|avif)$/i.test(f)) out.push(path.join(p, f));
    if (fs.statSync(p).isFile()) out.push(p);
  }
  return out;
}

async function preprocess(file, norm) {
  const { data, info } = await sharp(file)
    .rotate()
    .removeAlpha()
    .toColourspace('srgb')
    .resize(SIZE, SIZE, { fit: 'cover', position: 'centre' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.width !== SIZE || info.height !== SIZE || info.channels !== 3)
    throw new Error(`${file}: decoded to ${info.width}x${info.height}x${info.channels}`);
  const plane = SIZE * SIZE;
  const x = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++)
    for (let c = 0; c < 3; c++) {
      const p = data[i * 3 + c];
      x[c * plane + i] = norm === 'lite' ? (p - 127) / 128 : (p / 255 - CLIP_MEAN[c]) / CLIP_STD[c];
    }
  return x;
}

function softmax(v) {
  const m = Math.max(...v);
  const e = Array.from(v, (x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

function topK(v, k) {
  return Array.from(v.keys())
    .sort((a, b) => v[b] - v[a])
    .slice(0, k);
}

const norm2 = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

async function run(session, x) {
  const out = await session.run({ input: new ort.Tensor('float32', x, [1, 3, SIZE, SIZE]) });
  return { embedding: out[session.outputNames[0]].data, logits: out.logits?.data };
}

function compare(name, got, want) {
  let maxAbs = 0;
  let scale = 0;
  for (let i = 0; i < want.length; i++) {
    maxAbs = Math.max(maxAbs, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  const rel = maxAbs / (scale || 1);
  return { name, maxAbs, rel, ok: got.length === want.length && rel < 1e-4 };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const label = loadLabels(o.labels);
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(o.model, {
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    ...(o.threads ? { intraOpNumThreads: o.threads } : {}),
  });
  console.log(
    `model ${path.relative(process.cwd(), o.model) || o.model}: ${(fs.statSync(o.model).size / 1e6).toFixed(2)} MB, ` +
      `inputs ${session.inputNames.join(',')}, outputs ${session.outputNames.join(',')}, ` +
      `loaded in ${(performance.now() - t0).toFixed(0)} ms, onnxruntime-node ${ort.env.versions?.common ?? ''}`,
  );
  if (session.outputNames[0] !== 'embedding') throw new Error('first output is not "embedding"');
  let failed = false;

  if (o.refDir) {
    const names = fs
      .readdirSync(o.refDir)
      .filter((f) => f.endsWith('.f32'))
      .sort();
    let compared = 0;
    for (const f of names) {
      const refFile = path.join(o.refDir, f.replace(/\.f32$/, '.ref.json'));
      if (!fs.existsSync(refFile)) continue;
      const buf = fs.readFileSync(path.join(o.refDir, f));
      const x = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice();
      const ref = JSON.parse(fs.readFileSync(refFile, 'utf8'));
      const out = await run(session, x);
      const checks = [
        compare('embedding', out.embedding, ref.embedding),
        compare('logits', out.logits, ref.logits),
      ];
      const sameTop = topK(out.logits, 5).join() === topK(ref.logits, 5).join();
      for (const c of checks) failed ||= !c.ok;
      failed ||= !sameTop;
      compared++;
      console.log(
        `reference ${f}: ` +
          checks
            .map(
              (c) =>
                `${c.name} max|diff| ${c.maxAbs.toExponential(2)} (rel ${c.rel.toExponential(2)})`,
            )
            .join(', ') +
          `, top-5 ${sameTop ? 'identical' : 'DIFFERENT'} -> ${checks.every((c) => c.ok) && sameTop ? 'ok' : 'FAIL'}`,
      );
    }
    if (!compared) {
      console.log(`reference: no <name>.f32 with <name>.ref.json in ${o.refDir}`);
      failed = true;
    }
  }

  const images = listImages(o.inputs);
  if (o.dumpDir) fs.mkdirSync(o.dumpDir, { recursive: true });
  const times = [];
  for (const file of images) {
    const x = await preprocess(file, o.norm);
    if (o.dumpDir)
      fs.writeFileSync(
        path.join(o.dumpDir, path.basename(file).replace(/\.[^.]+$/, '') + '.f32'),
        Buffer.from(x.buffer),
      );
    await run(session, x); // warm-up
    const ts = [];
    let out;
    for (let r = 0; r < o.runs; r++) {
      const t = performance.now();
      out = await run(session, x);
      ts.push(performance.now() - t);
    }
    const ms = median(ts);
    times.push(ms);
    const p = softmax(out.logits);
    const top = topK(out.logits, 5);
    const ok = !o.expect || o.expect.includes(top[0]);
    failed ||= !ok;
    console.log(
      `${path.basename(file)}: top-5 ` +
        top
          .map((i) => `${i}${label(i) ? ` ${label(i)}` : ''} (${(p[i] * 100).toFixed(1)}%)`)
          .join(', ') +
        ` | embedding dim ${out.embedding.length} norm ${norm2(out.embedding).toFixed(3)} | ${ms.toFixed(1)} ms` +
        (ok ? '' : ' | UNEXPECTED top-1'),
    );
  }
  if (times.length)
    console.log(
      `${times.length} images, median inference ${median(times).toFixed(1)} ms/image ` +
        `(min ${Math.min(...times).toFixed(1)}, max ${Math.max(...times).toFixed(1)}), ${o.runs} timed runs each`,
    );
  if (!images.length && !o.refDir) {
    console.error(
      'usage: node scripts/model/check-model.mjs [options] IMAGE|DIR... (see the header of this file)',
    );
    failed = true;
  }
  if (failed) {
    console.error('check FAILED');
    process.exit(1);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
