/**
 * What Elasticsearch spends indexing a processed item, with its embedding sent as JSON.stringify
 * writes it (the doubles its float32s widen to) and as the service sends it (float32 text,
 * VectorTextSerializer). The same documents (the store's own toDoc, 1,420-d vectors) go in
 * bulks of 8, as workers' results do, into a fresh index with the item mapping; the two
 * serializers alternate for BENCH_ROUNDS rounds, after one that is not kept. The node's CPU,
 * indexing and refresh time come from its stats, per document.
 *
 *   npm run bench:vector-text      (BENCH_DOCS, default 3000; BENCH_ROUNDS, default 3)
 */
import { Client } from '@elastic/elasticsearch';
import {
  toDoc,
  vectorField,
  type ItemDoc,
} from 'visual-search-service/dist/adapters/elasticsearch/document';
import { itemMapping } from 'visual-search-service/dist/adapters/elasticsearch/mapping';
import { VectorTextSerializer } from 'visual-search-service/dist/adapters/elasticsearch/vector-text';
import type { StoredItem } from 'visual-search-service/dist/domain/item';
import { ES_URL, machine, writeResult } from './common';

const DOCS = Number(process.env.BENCH_DOCS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DIMS = 1420;
const BULK = 8;

/** Unit vectors of float32s, as the embedder gives them. */
const vectors = Array.from({ length: 200 }, (_, j) => {
  const v = Array.from({ length: DIMS }, (_, k) => Math.sin((j + 1) * 7.3 + k * 0.37) + 0.1);
  const norm = Math.hypot(...v);
  return v.map((x) => Math.fround(x / norm));
});

const item = (n: number): StoredItem => ({
  id: `item-${n}`,
  url: `http://images.example/${n}.jpg`,
  metadata: { category: `c${n % 12}`, price: n % 500, tags: [`t${n % 7}`] },
  privateMetadata: {},
  state: 'processed',
  createdAt: 1,
  updatedAt: 2,
  image: { width: 800, height: 600, url: `http://images.example/${n}.jpg`, processedAt: 2 },
});

async function nodeStats(es: Client) {
  const r = await es.nodes.stats({ node_id: '_local', metric: ['process', 'indices'] });
  const n = Object.values(r.nodes)[0]!;
  return {
    cpu: n.process!.cpu!.total_in_millis!,
    index: n.indices!.indexing!.index_time_in_millis!,
    refresh: n.indices!.refresh!.total_time_in_millis!,
  };
}

/**
 * The service's documents hold the vector as a Float32Array; as a plain array of numbers,
 * JSON.stringify writes it as before the float32 text (the stock client could not send the
 * typed array at all).
 */
const asDoubles = (d: ItemDoc): ItemDoc => ({
  ...d,
  [vectorField(DIMS)]: Array.from(d[vectorField(DIMS)] as Float32Array),
});

async function run(es: Client, name: string, shape: (d: ItemDoc) => ItemDoc) {
  const index = `bench-vector-text-${name}`;
  await es.indices.delete({ index }, { ignore: [404] });
  await es.indices.create({
    index,
    settings: { number_of_shards: 1, number_of_replicas: 0, refresh_interval: '1s' },
    mappings: itemMapping(DIMS) as never,
  });
  try {
    const before = await nodeStats(es);
    const start = Date.now();
    let bytes = 0;
    let clientMs = 0;
    for (let b = 0; b < DOCS; b += BULK) {
      const t = performance.now();
      const ops = Array.from({ length: BULK }, (_, i) => [
        { index: { _index: index, _id: `item-${b + i}` } },
        shape(toDoc('ds', item(b + i), null, { vector: vectors[(b + i) % 200]!, embedder: 'e' })),
      ]).flat();
      // measured apart; the client serializes the same operations again to send them
      const body = es.serializer.ndserialize(ops);
      clientMs += performance.now() - t;
      bytes += Buffer.byteLength(body);
      const r = await es.bulk({ operations: ops });
      if (r.errors) throw new Error(`bulk: ${JSON.stringify(r.items.find((x) => x.index?.error))}`);
    }
    const seconds = (Date.now() - start) / 1000;
    // the last scheduled refresh is part of the cost
    await new Promise((r) => setTimeout(r, 1500));
    const after = await nodeStats(es);
    const per = (k: keyof typeof after) =>
      Math.round(((after[k] - before[k]) / DOCS) * 1000) / 1000;
    return {
      serializer: name,
      bytes_per_doc: Math.round(bytes / DOCS),
      client_serialize_ms_per_doc: Math.round((clientMs / DOCS) * 1000) / 1000,
      docs_per_s: Math.round(DOCS / seconds),
      es_cpu_ms_per_doc: per('cpu'),
      es_index_ms_per_doc: per('index'),
      es_refresh_ms_per_doc: per('refresh'),
    };
  } finally {
    await es.indices.delete({ index }, { ignore: [404] });
  }
}

async function main(): Promise<void> {
  const clients = {
    doubles: new Client({ node: ES_URL }),
    float32_text: new Client({ node: ES_URL, Serializer: VectorTextSerializer }),
  };
  const shapes = { doubles: asDoubles, float32_text: (d: ItemDoc) => d };
  const runs: Array<{ round: number } & Awaited<ReturnType<typeof run>>> = [];
  try {
    // round 0 warms the node's JIT and is not kept: the first run of either was the slowest
    for (let r = 0; r <= ROUNDS; r++)
      for (const [name, es] of Object.entries(clients)) {
        const out = { round: r, ...(await run(es, name, shapes[name as keyof typeof shapes])) };
        if (r === 0) continue;
        process.stderr.write(`${JSON.stringify(out)}\n`);
        runs.push(out);
      }
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
  }
  const mean = (name: string, k: 'es_cpu_ms_per_doc' | 'es_index_ms_per_doc') => {
    const xs = runs.filter((x) => x.serializer === name).map((x) => x[k]);
    return Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1000) / 1000;
  };
  const file = writeResult('vector-text', {
    benchmark: 'vector-text',
    date: new Date().toISOString(),
    machine: machine(),
    note: `${DOCS} processed items (${DIMS}-d) per run in bulks of ${BULK}, item mapping, refresh 1 s; serializers alternate`,
    mean: Object.fromEntries(
      Object.keys(clients).map((n) => [
        n,
        {
          es_cpu_ms_per_doc: mean(n, 'es_cpu_ms_per_doc'),
          es_index_ms_per_doc: mean(n, 'es_index_ms_per_doc'),
        },
      ]),
    ),
    runs,
  });
  process.stdout.write(`written to ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
