/**
 * Visual similarity quality: precision@10 of `GET …/similar` on a labelled image set, per
 * embedder and per engine, and the kNN recall@10 of Elasticsearch's HNSW index against exact
 * search over the same vectors. Writes bench/results/similarity-quality.json.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { DescriptorEmbedder } from '../src/adapters/embedders/descriptor';
import { SharpImageAnalyzer } from '../src/adapters/images/sharp-analyzer';
import {
  ES_URL,
  call,
  createDataset,
  machine,
  startService,
  writeResult,
  type Engine,
} from './common';
import { CLASSES, labelledImages, type LabelledImage } from './labelled-images';

const PER_CLASS = Number(process.env.BENCH_PER_CLASS ?? 40);
const K = 10;
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,elasticsearch').split(',') as Engine[];

function serve(images: LabelledImage[]): Promise<{ url: string; close(): void }> {
  const byPath = new Map(
    images.map((i) => [`/img/${i.id}.${i.format === 'png' ? 'png' : 'jpg'}`, i]),
  );
  const server = http.createServer((req, res) => {
    const img = byPath.get(req.url ?? '');
    if (!img) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': `image/${img.format}` }).end(img.bytes);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => server.close(),
      }),
    ),
  );
}

const mean = (xs: number[]) =>
  Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10000) / 10000;

/** Exact top-k neighbours (excluding the item itself) by cosine, from in-process embeddings. */
async function exactNeighbours(images: LabelledImage[]): Promise<Map<string, string[]>> {
  const analyzer = new SharpImageAnalyzer(new DescriptorEmbedder());
  const vecs = await Promise.all(images.map(async (i) => (await analyzer.analyze(i.bytes)).vector));
  const out = new Map<string, string[]>();
  images.forEach((q, qi) => {
    const scored = images
      .map((c, ci) => ({
        id: c.id,
        d: ci === qi ? -Infinity : vecs[qi]!.reduce((s, x, k) => s + x * vecs[ci]![k]!, 0),
      }))
      .sort((a, b) => b.d - a.d);
    out.set(
      q.id,
      scored.slice(0, K).map((s) => s.id),
    );
  });
  return out;
}

async function engineRun(engine: Engine, images: LabelledImage[], imgUrl: string) {
  const prefix = `bench-q-${Date.now().toString(36)}-`;
  const app = await startService({
    IMAGE_FETCH_ALLOW_PRIVATE: 'true',
    WORKER_CONCURRENCY: '8',
    ...(engine === 'elasticsearch'
      ? { SEARCH_BACKEND: 'elasticsearch', ELASTICSEARCH_URL: ES_URL, ES_INDEX_PREFIX: prefix }
      : {}),
  });
  try {
    const base = app.url!;
    const { orgToken, dsToken } = await createDataset(app, 'shapes');
    const content = images.map((i) => ({
      id: i.id,
      url: `${imgUrl}/img/${i.id}.${i.format === 'png' ? 'png' : 'jpg'}`,
      metadata: { label: i.label },
    }));
    const w = await call(base, 'POST', '/orgs/bench/datasets/shapes/content', orgToken, {
      content,
    });
    if (w.status !== 202) throw new Error(JSON.stringify(w.body));
    for (;;) {
      const d = await call(base, 'GET', '/orgs/bench/datasets/shapes', orgToken);
      const c = d.body.dataset.counts;
      if (c.pending === 0 && c.processed + c.errors >= images.length) {
        if (c.errors) throw new Error(`${c.errors} images failed`);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const results = new Map<string, string[]>();
    for (const i of images) {
      const r = await call(
        base,
        'GET',
        `/orgs/bench/datasets/shapes/similar?id=${i.id}&limit=${K + 1}`,
        dsToken,
      );
      if (r.status !== 200) throw new Error(JSON.stringify(r.body));
      results.set(
        i.id,
        (r.body.results as Array<{ id: string }>).slice(1).map((x) => x.id),
      );
    }
    return results;
  } finally {
    await app.stop();
    if (engine === 'elasticsearch') await fetch(`${ES_URL}/${prefix}*`, { method: 'DELETE' });
  }
}

async function main(): Promise<void> {
  const images = await labelledImages(PER_CLASS);
  const label = new Map(images.map((i) => [i.id, i.label]));
  const precision = (res: Map<string, string[]>) => {
    const per = images.map(
      (i) => res.get(i.id)!.filter((id) => label.get(id) === i.label).length / K,
    );
    const byClass = Object.fromEntries(
      CLASSES.map((c) => [
        c.name,
        mean(images.flatMap((i, n) => (i.label === c.name ? [per[n]!] : []))),
      ]),
    );
    return { precision_at_10: mean(per), by_class: byClass };
  };
  const exact = await exactNeighbours(images);
  const server = await serve(images);
  const runs: Record<string, unknown>[] = [];
  try {
    for (const engine of ENGINES) {
      const res = await engineRun(engine, images, server.url);
      const recall = mean(
        images.map((i) => res.get(i.id)!.filter((id) => exact.get(i.id)!.includes(id)).length / K),
      );
      const p = precision(res);
      runs.push({ embedder: 'descriptor-v1', engine, ...p, recall_at_10_vs_exact: recall });
      console.log(`${engine}: precision@10 ${p.precision_at_10}, recall@10 vs exact ${recall}`);
    }
  } finally {
    server.close();
  }
  const file = writeResult('similarity-quality', {
    benchmark: 'similarity-quality',
    date: new Date().toISOString(),
    machine: machine(),
    image_set: {
      classes: CLASSES.map((c) => c.name),
      per_class: PER_CLASS,
      images: images.length,
      variation:
        'position, scale (radius 18–35% of the side), rotation ±25°, hue ±12°, saturation ±12, lightness ±9, background, pixel noise ±6–24, png or jpeg q80',
      note: 'no npm package with a usable labelled photo set was found; this set is generated',
    },
    k: K,
    exact_precision_at_10: { 'descriptor-v1': precision(exact).precision_at_10 },
    runs,
    onnx: 'not measured: the onnx embedder is not built yet',
  });
  console.log(`wrote ${file}`);
}

void main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
