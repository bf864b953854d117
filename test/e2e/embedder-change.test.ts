/**
 * @jest-environment ./test/setup/native-typed-arrays-env.js
 */
/**
 * Changing EMBEDDER on an existing deployment: the dataset records the new embedder, every
 * processed item is embedded again by a worker (no new image counted), and an item whose image
 * has since disappeared stays searchable but leaves similarity. Runs on both engines.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setupDataset, startTestApp, tempDir, waitProcessed, type TestApp } from '../helpers/app';
import { DatasetEmbedderDocument } from '../graphql/generated';
import { gql } from '../helpers/graphql';
import { startImageServer } from '../helpers/image-server';
import { meanColourModel } from '../helpers/onnx-model';

async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('EMBEDDER descriptor → onnx: items re-embedded, counted once, dataset records the embedder', async () => {
  const img = await startImageServer();
  const dataDir = tempDir();
  const model = path.join(tempDir('vss-onnx-'), 'model.onnx');
  fs.writeFileSync(model, meanColourModel(16));
  let t: TestApp | undefined = await startTestApp({}, dataDir); // a restart on dataDir finds the same installation
  try {
    const ds = await setupDataset(t, 'embchange', 'd');
    const content = [1, 2, 3].map((n) => ({ id: `i${n}`, url: `${img.url}/img/${n}.png` }));
    await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
    await waitProcessed(t, ds.base, ds.orgToken, 3);
    const status = async (app: TestApp) =>
      (
        await gql(
          app.url,
          DatasetEmbedderDocument,
          { organisation: 'embchange', dataset: 'd' },
          ds.orgToken,
        )
      ).data!.organisation.dataset;
    const before = await status(t);
    expect(before.embedder).toEqual({
      id: t.app.container.embedder.id,
      dimensions: 140,
      reprocessing: 0,
    });
    const oldId = t.app.container.embedder.id;
    await t.stop({ keep: true });
    t = undefined;

    img.gone.add('/img/3.png'); // removed at the source since it was processed
    const fetchedBefore = img.hits.get('/img/1.png');
    t = await startTestApp({ EMBEDDER: 'onnx', EMBEDDER_MODEL_PATH: model }, dataDir);
    const app = t;
    const newId = app.app.container.embedder.id;
    expect(newId).not.toBe(oldId);
    const view = await until(
      'dataset re-embedding',
      () => status(app),
      (d) => d.embedder.reprocessing === 0,
    );
    expect(view.embedder).toEqual({ id: newId, dimensions: 3, reprocessing: 0 });
    expect(view.counts).toEqual({ items: 3, processed: 3, pending: 0, errors: 0 });
    // Fetched again for its new vector. Every worker's start-up sweep queues the items to
    // re-embed, so with several workers (the production installation has two) two jobs for one
    // item may run at once and both fetch; the image is counted once all the same (below).
    const workers = t.hosts.filter((h) => h.container.config.APP_ROLES.has('worker')).length;
    const refetched = img.hits.get('/img/1.png')! - fetchedBefore!;
    expect(refetched).toBeGreaterThanOrEqual(1);
    expect(refetched).toBeLessThanOrEqual(workers);

    const stored = await app.app.container.ports.accounts.getDataset('embchange', 'd');
    expect(stored!.embedder).toEqual({ id: newId, dimensions: 3 });
    const e1 = await app.app.container.ports.content.getEmbedding(stored!.id, 'i1');
    expect(e1).toEqual({ embedder: newId, vector: expect.any(Array) });
    expect(e1!.vector).toHaveLength(3);
    // the vanished image: still processed and listed, but without a vector of the new embedder
    expect(await app.app.container.ports.content.getEmbedding(stored!.id, 'i3')).toEqual({
      embedder: newId,
    });
    const listed = await app.call('GET', `${ds.base}/content`, { token: ds.orgToken });
    expect(listed.body.content.map((c: { id: string }) => c.id)).toEqual(['i1', 'i2', 'i3']);

    type Hits = Awaited<ReturnType<typeof app.app.container.ports.engine.similar>>;
    const hits = await until<Hits>(
      'new vectors searchable',
      () =>
        app.app.container.ports.engine.similar(stored!.id, {
          vector: e1!.vector!,
          embedder: newId,
          conditions: [],
          limit: 10,
          excludeIds: [],
        }),
      (h) => h.length === 2,
    );
    expect(hits[0]!.item.id).toBe('i1');
    expect(hits.map((h) => h.item.id).sort()).toEqual(['i1', 'i2']);

    // re-embedding is not a new image (contract §8 counts new urls only)
    const usage = (await app.call('GET', '/orgs/embchange/usage', { token: ds.orgToken })).body;
    expect(usage.usage.images.processed).toBe(3);
  } finally {
    await t?.stop();
    await img.close();
  }
}, 90_000);

test('similar while a dataset is re-embedded: 503 until the item is done, 404 if its image is gone', async () => {
  // API only: no worker re-embeds behind the test's back; the test plays the worker's part
  const t = await startTestApp({ APP_ROLES: 'api' });
  try {
    const ds = await setupDataset(t, 'embwait', 'd');
    const {
      ports: { content, accounts },
      embedder,
    } = t.app.container;
    const stored = (await accounts.getDataset('embwait', 'd'))!;
    const writes = Array.from({ length: 200 }, (_, n) => ({
      id: `i${String(n).padStart(3, '0')}`,
      url: `https://img.test/${n}.png`,
    }));
    const jobs = await content.applyWrites(stored.id, writes, 'post', Date.now());
    const unit = (k: number) => Array.from({ length: 140 }, (_, i) => (i === k ? 1 : 0));
    // processed by a previous embedder
    for (const j of jobs)
      await content.markProcessed(
        j,
        { width: 8, height: 8, format: 'png', vector: unit(1), embedder: 'old-embedder' },
        Date.now(),
      );
    await until(
      'processed',
      async () => (await content.counts(stored.id)).processed,
      (n) => n === 200,
    );
    const similar = (id: string) =>
      t.call('GET', `${ds.base}/similar?id=${id}&limit=5`, { token: ds.dsToken });

    const waiting = await similar('i000');
    expect(waiting.status).toBe(503);
    expect(waiting.body.error.code).toBe('unavailable');
    expect(waiting.body.error.message).toMatch(/re-processed/);
    expect(Number(waiting.headers.get('retry-after'))).toBeGreaterThan(0);

    const [j0, j1, j2] = jobs;
    await content.markEmbedded(j0!, { vector: [], embedder: embedder.id });
    await content.markEmbedded(j1!, { vector: unit(0), embedder: embedder.id });
    await content.markEmbedded(j2!, { vector: unit(0), embedder: embedder.id });
    const gone = await until(
      'the failed re-embed visible',
      () => similar('i000'),
      (r) => r.status !== 503,
    );
    expect(gone.status).toBe(404);
    expect(gone.body.error.message).toMatch(/no visual embedding/);

    // only items already re-embedded take part
    const ok = await until(
      'the new vectors visible',
      () => similar('i001'),
      (r) => r.status === 200 && r.body.results.length === 2,
    );
    expect(ok.body.results.map((r: { id: string }) => r.id)).toEqual(['i001', 'i002']);
    const status = await gql(
      t.url,
      DatasetEmbedderDocument,
      { organisation: 'embwait', dataset: 'd' },
      ds.orgToken,
    );
    expect(status.data!.organisation.dataset.embedder.reprocessing).toBe(197);
  } finally {
    await t.stop();
  }
}, 90_000);
