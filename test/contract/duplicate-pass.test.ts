/**
 * The duplicate pass (contract §18) on every engine's real ports: what it stores for copies and
 * look-alikes, that it does nothing when nothing changed, that an embedder change waits for the
 * re-embedding before starting over, that a long pass runs in slices other datasets' passes
 * take turns with and that another process goes on from, and that it stops when another
 * process holds the lease.
 */
import path from 'node:path';
import pino from 'pino';
import { openDb } from '../../src/adapters/embedded/db';
import { embeddedPorts } from '../../src/adapters/embedded/embedded-ports';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { esPorts } from '../../src/adapters/elasticsearch/es-ports';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import type { EnginePorts } from '../../src/adapters/engine-ports';
import { copySignature } from '../../src/domain/copy-signature';
import type { Dataset } from '../../src/domain/dataset';
import type { ProcessingJob } from '../../src/domain/item';
import { DuplicatePass } from '../../src/jobs/duplicate-pass';
import { tempDir } from '../helpers/app';
import { tierOf } from './tier';

const ES_URL = process.env.ELASTICSEARCH_URL ?? 'http://127.0.0.1:9200';
const DIMS = 8;
const T0 = Date.UTC(2026, 10, 27, 10, 0);

interface Rig {
  ports: EnginePorts;
  ready: Promise<void>;
  close(): Promise<void>;
}

const rigs = tierOf<() => Rig>({
  local: [
    'embedded',
    () => {
      const dir = tempDir('vss-pass-');
      const db = openDb(path.join(dir, 'store.db'));
      return {
        ports: embeddedPorts(db, dir),
        ready: Promise.resolve(),
        close: async () => {
          db.close();
        },
      };
    },
  ],
  services: [
    'Elasticsearch',
    () => {
      const client = esClient(ES_URL);
      const prefix = `p${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-`;
      const indices = new EsIndices(client, prefix, { shards: 1, replicas: 0 });
      return {
        ports: esPorts(indices, { vectorDims: DIMS }),
        ready: (async () => {
          await indices.ensureShared();
          await indices.ensureItemTemplate(DIMS);
        })(),
        close: async () => {
          await client.indices.delete({ index: `${prefix}*` }).catch(() => undefined);
          await client.indices
            .deleteIndexTemplate({ name: `${prefix}items` })
            .catch(() => undefined);
          await client.close();
        },
      };
    },
  ],
});

const unit = (v: number[]): number[] => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
/** A 16 × 16 picture with a pattern drawn from `seed`, as the analyzer's decode would be. */
const picture = (seed: number): Uint8Array =>
  Uint8Array.from({ length: 16 * 16 * 3 }, (_, i) => ((i * (seed * 7 + 3)) % 251) ^ (seed * 31));

describe.each(rigs)('DuplicatePass on %s', (_name, make) => {
  let rig: Rig;
  let now = T0;
  const ds = 'dsp';
  beforeEach(async () => {
    rig = make();
    await rig.ready;
    now = T0;
    searched = [];
    merges = [];
  });
  afterEach(async () => rig.close());

  /** The ids each neighbour search asked for, per dataset, in order (the real engine answers). */
  let searched: Array<[string, string[]]> = [];
  /** The datasets whose merge the pass started, and whether it waited (the real engine merges). */
  let merges: Array<[string, boolean]> = [];
  const pass = (owner = 'host-a', options: { pageSize?: number; sliceMs?: number } = {}) =>
    new DuplicatePass({
      store: rig.ports.duplicates,
      reader: rig.ports.content,
      engine: {
        neighbours: (dataset, embedder, ids, maxDistance, k) => {
          searched.push([dataset, [...ids]]);
          return rig.ports.engine.neighbours(dataset, embedder, ids, maxDistance, k);
        },
        compact: async (dataset, keepWaiting) => {
          merges.push([dataset, await keepWaiting()]);
          return rig.ports.engine.compact(dataset, keepWaiting);
        },
      },
      datasets: async () =>
        ['dsp', 'dsq'].map((id) => ({ id, embedder: { id: 'e1' } }) as unknown as Dataset),
      ...options,
      counts: (id) => rig.ports.content.counts(id),
      waitingForEmbedder: (id, e) => rig.ports.content.staleEmbeddingCount(id, e),
      now: () => now,
      log: pino({ level: 'silent' }),
      owner,
    });

  /** Items with their vectors and pictures, processed at `now`, then visible to queries. */
  async function processed(
    items: Array<{ id: string; v: number[]; pic: number; hash?: string }>,
    embedder: string,
    dataset = ds,
  ) {
    const jobs: ProcessingJob[] = await rig.ports.content.applyWrites(
      dataset,
      items.map((it) => ({ id: it.id, url: `https://img.test/${it.id}.png` })),
      'post',
      now,
    );
    for (const j of jobs) {
      const it = items.find((x) => x.id === j.itemId)!;
      await rig.ports.content.markProcessed(
        j,
        {
          width: 16,
          height: 16,
          format: 'png',
          vector: unit(it.v),
          embedder,
          copySignature: copySignature(picture(it.pic), 16),
          ...(it.hash ? { pixelHash: it.hash } : {}),
        },
        now,
      );
    }
    const deadline = Date.now() + 5000;
    while (
      (await rig.ports.content.processedSince(dataset, undefined, undefined, 100)).length <
      items.length
    )
      if (Date.now() > deadline) throw new Error('items not visible');
      else await new Promise((r) => setTimeout(r, 100));
    return jobs;
  }

  const neighboursOf = async (id: string, dataset = ds) =>
    (await rig.ports.duplicates.entries(dataset))
      .find((e) => e.id === id)
      ?.neighbours.map((n) => n.id) ?? [];

  test('copies are stored, look-alikes are not; nothing new, nothing done', async () => {
    await processed(
      [
        { id: 'a', v: [1, 0.1, 0, 0, 0, 0, 0, 0], pic: 1 },
        // the same picture, a little further in embedding: a copy
        { id: 'b', v: [1, 0.15, 0.02, 0, 0, 0, 0, 0], pic: 1 },
        // as close in embedding, another picture: a look-alike
        { id: 'c', v: [1, 0.05, 0.05, 0, 0, 0, 0, 0], pic: 2 },
        { id: 'd', v: [0, 0, 0, 1, 0, 0, 0, 0], pic: 3 },
      ],
      'e1',
    );
    now = T0 + 60_000;
    expect(await pass().dataset(ds, 'e1')).toBe(true);
    expect(await neighboursOf('a')).toEqual(['b']);
    expect(await neighboursOf('c')).toEqual([]);
    expect(await rig.ports.duplicates.state(ds)).toEqual({
      watermark: T0 + 60_000 - 5000,
      computedAt: T0 + 60_000,
      embedder: 'e1',
    });
    now = T0 + 120_000;
    expect(await pass().dataset(ds, 'e1')).toBe(false);
  });

  test('items of the same pixels are left to their exact group, not stored as near pairs', async () => {
    await processed(
      [
        { id: 'p1', v: [0, 0, 0, 0, 1, 0, 0, 0], pic: 4, hash: 'h-placeholder' },
        { id: 'p2', v: [0, 0, 0, 0, 1, 0, 0, 0], pic: 4, hash: 'h-placeholder' },
        // the placeholder re-saved with other pixels: a near copy of both
        { id: 'p3', v: [0, 0, 0, 0, 1, 0.05, 0, 0], pic: 4, hash: 'h-other' },
      ],
      'e1',
    );
    now = T0 + 60_000;
    expect(await pass().dataset(ds, 'e1')).toBe(true);
    expect(await neighboursOf('p1')).toEqual(['p3']);
    expect(await neighboursOf('p2')).toEqual(['p3']);
    expect((await neighboursOf('p3')).sort()).toEqual(['p1', 'p2']);
  });

  test('an embedder change waits for the re-embedding, then merges the index and starts over', async () => {
    const jobs = await processed(
      [
        { id: 'a', v: [1, 0.1, 0, 0, 0, 0, 0, 0], pic: 1 },
        { id: 'b', v: [1, 0.12, 0, 0, 0, 0, 0, 0], pic: 1 },
      ],
      'e1',
    );
    now = T0 + 60_000;
    expect(await pass().dataset(ds, 'e1')).toBe(true);
    // the dataset now says e2, the items still carry e1's vectors: the old pairs stay
    now = T0 + 120_000;
    expect(await pass().dataset(ds, 'e2')).toBe(false);
    expect((await rig.ports.duplicates.state(ds)).embedder).toBe('e1');
    expect(await neighboursOf('a')).toEqual(['b']);
    for (const j of jobs)
      await rig.ports.content.markEmbedded(j, {
        vector: unit(j.itemId === 'a' ? [0, 1, 0, 0, 0, 0, 0, 0] : [0, 1, 0.1, 0, 0, 0, 0, 0]),
        embedder: 'e2',
        copySignature: copySignature(picture(1), 16),
      });
    const deadline = Date.now() + 5000;
    while ((await rig.ports.content.staleEmbeddingCount(ds, 'e2')) > 0)
      if (Date.now() > deadline) throw new Error('still stale');
      else await new Promise((r) => setTimeout(r, 100));
    // no merge for a first pass, nor while items wait for their new vectors
    expect(merges).toEqual([]);
    expect(await pass().dataset(ds, 'e2')).toBe(true);
    // one, started without holding up the pass (other datasets' reports are due)
    expect(merges).toEqual([[ds, false]]);
    expect((await rig.ports.duplicates.state(ds)).embedder).toBe('e2');
    expect(await neighboursOf('a')).toEqual(['b']);
    now = T0 + 180_000;
    expect(await pass().dataset(ds, 'e2')).toBe(false);
    expect(merges).toHaveLength(1);
  });

  /** Twelve items in six copy pairs, a04/a05 across the first page boundary of five. */
  const pairs = (prefix: string) =>
    Array.from({ length: 12 }, (_, i) => {
      const v = [0, 0, 0, 0, 0, 0, 0, 0];
      v[Math.floor(i / 2) % 8] = 1;
      v[(Math.floor(i / 2) + 1) % 8] = i % 2 ? 0.12 : 0.1;
      return { id: `${prefix}${String(i).padStart(2, '0')}`, v, pic: 10 + Math.floor(i / 2) };
    });

  test('a pass cut short goes on where it stopped, in another process', async () => {
    await processed(pairs('a'), 'e1');
    now = T0 + 60_000;
    const started = now;
    expect(await pass('host-a', { pageSize: 5, sliceMs: 0 }).dataset(ds, 'e1')).toBe('paused');
    expect(searched.flatMap(([, ids]) => ids)).toEqual(['a00', 'a01', 'a02', 'a03', 'a04']);
    expect(await rig.ports.duplicates.state(ds)).toEqual({
      progress: { started, after: 'a04', embedder: 'e1' },
    });
    // host-a stops; once its lease has run out host-b takes over and searches the rest only
    searched = [];
    now += 61_000;
    const b = pass('host-b', { pageSize: 5, sliceMs: 0 });
    expect(await rig.ports.duplicates.claim('host-b', now, now + 60_000)).toBe(true);
    expect(await b.dataset(ds, 'e1')).toBe('paused');
    expect(await b.dataset(ds, 'e1')).toBe(true);
    expect(searched.flatMap(([, ids]) => ids)).toEqual(
      ['05', '06', '07', '08', '09', '10', '11'].map((n) => `a${n}`),
    );
    // the pair across the boundary was found from both sides
    expect(await neighboursOf('a04')).toEqual(['a05']);
    expect(await neighboursOf('a05')).toEqual(['a04']);
    expect(await neighboursOf('a11')).toEqual(['a10']);
    // the watermark is the first slice's start: items processed since then are searched next
    expect(await rig.ports.duplicates.state(ds)).toEqual({
      watermark: started - 5000,
      computedAt: now,
      embedder: 'e1',
    });
  });

  test('a pass under way goes on while new items wait for processing', async () => {
    await processed(pairs('a'), 'e1');
    now = T0 + 60_000;
    const a = pass('host-a', { pageSize: 5, sliceMs: 0 });
    expect(await a.dataset(ds, 'e1')).toBe('paused');
    // an ingestion starts: a new pass would wait for it, the one under way does not
    await rig.ports.content.applyWrites(
      ds,
      [{ id: 'z-new', url: 'https://img.test/z-new.png' }],
      'post',
      now,
    );
    expect((await rig.ports.content.counts(ds)).pending).toBe(1);
    expect(await a.dataset(ds, 'e1')).toBe('paused');
    expect(await a.dataset(ds, 'e1')).toBe(true);
    expect(searched.flatMap(([, ids]) => ids)).toHaveLength(12);
    // the next pass waits for the ingestion to settle
    await processed([{ id: 'z-late', v: [0, 0, 0, 0, 0, 0, 1, 1], pic: 30 }], 'e1');
    now += 60_000;
    expect(await a.dataset(ds, 'e1')).toBe(false);
  });

  test('datasets take turns: a short pass is not held up by a long one', async () => {
    await processed(pairs('a'), 'e1');
    await processed(pairs('q').slice(0, 2), 'e1', 'dsq');
    now = T0 + 60_000;
    expect(await pass('host-a', { pageSize: 5, sliceMs: 0 }).pass()).toBe(true);
    // dsq was searched after dsp's first slice, before the rest of dsp
    expect(searched.map(([dataset, ids]) => `${dataset}:${ids.length}`)).toEqual([
      'dsp:5',
      'dsq:2',
      'dsp:5',
      'dsp:2',
    ]);
    expect(await neighboursOf('q00', 'dsq')).toEqual(['q01']);
    expect((await rig.ports.duplicates.state('dsq')).computedAt).toBe(now);
    expect((await rig.ports.duplicates.state(ds)).computedAt).toBe(now);
  });

  test('another process holding the lease: no pass here', async () => {
    expect(await rig.ports.duplicates.claim('host-b', now, now + 60_000)).toBe(true);
    expect(await pass('host-a').pass()).toBe(false);
    now += 60_001;
    expect(await pass('host-a').pass()).toBe(true);
  });
});
