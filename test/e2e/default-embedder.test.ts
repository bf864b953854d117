/**
 * @jest-environment ./test/setup/native-typed-arrays-env.js
 */
/**
 * The learned default (issue 16) through the whole service, on whichever engine the project
 * runs: a dataset made with the descriptor is re-embedded by the hybrid after a restart, its
 * 1420-dimension vectors are searchable (`similar`, lens), and a recompressed copy finds its
 * original among the first results. Other suites run the descriptor for speed (test/helpers/app.ts).
 */
import sharp from 'sharp';
import { hybridId } from '../../src/adapters/embedders';
import { DatasetEmbedderDocument } from '../graphql/generated';
import { gql } from '../helpers/graphql';
import {
  OPERATOR,
  setupDataset,
  startTestApp,
  tempDir,
  waitFor,
  waitProcessed,
  type TestApp,
} from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

const N = 200;
let img: ImageServer;
let t: TestApp | undefined;
afterAll(async () => {
  await t?.stop();
  await img?.close();
});

test('descriptor → hybrid: re-embedded at 1420 dimensions, similar and lens answer', async () => {
  img = await startImageServer();
  const dataDir = tempDir();
  t = await startTestApp({ EMBEDDER: 'descriptor' }, dataDir);
  const ds = await setupDataset(t, 'learned', 'd');
  const content = Array.from({ length: N }, (_, i) => ({
    id: `p${i}`,
    url: `${img.url}/img/${i}.${i % 2 ? 'jpg' : 'png'}`,
  }));
  expect(
    (await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } })).status,
  ).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
  await t.stop({ keep: true });

  t = await startTestApp({ EMBEDDER: 'hybrid' }, dataDir);
  const app = t;
  expect(app.app.container.embedder).toEqual({ id: hybridId(), dimensions: 1420 });
  const view = await waitFor(
    'every item re-embedded by the hybrid',
    async () => {
      const d = (
        await gql(
          app.url,
          DatasetEmbedderDocument,
          { organisation: 'learned', dataset: 'd' },
          ds.orgToken,
        )
      ).data!.organisation.dataset;
      return d.embedder.reprocessing === 0 && d.embedder.id === hybridId() && d;
    },
    120_000,
  );
  expect(view.embedder.dimensions).toBe(1420);

  // One model session per process, fed by concurrent jobs: images that waited behind a run
  // went together in the next one (embedder_run_images on /metrics).
  const scraped = await Promise.all(
    app.hosts.map(async (h) => {
      const r = await fetch(`${h.healthUrl}/metrics`, {
        headers: { authorization: `token ${OPERATOR}` },
      });
      return r.text();
    }),
  );
  const total = (name: string) =>
    scraped.reduce((n, s) => n + Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(s)?.[1] ?? 0), 0);
  expect(total('embedder_run_images_sum')).toBeGreaterThanOrEqual(N);
  expect(total('embedder_run_images_count')).toBeLessThan(total('embedder_run_images_sum'));

  const similar = await app.call('GET', `${ds.base}/similar?id=p7&limit=5`, {
    token: ds.dsToken,
  });
  expect(similar.status).toBe(200);
  expect(similar.body.results.map((r: { id: string }) => r.id)[0]).toBe('p7');
  expect(similar.body.results).toHaveLength(5);

  // lens: a recompressed copy of a pushed image finds it among the first three (changed real
  // photos are measured by bench/similarity-quality.ts; these 48-pixel test images are a flat
  // colour and a bar, and many differ by little more than JPEG noise)
  for (const n of [3, 42, 150]) {
    const original = Buffer.from(await (await fetch(`${img.url}/img/${n}.png`)).arrayBuffer());
    const query = await sharp(original).jpeg({ quality: 90 }).toBuffer();
    const lens = await app.call('POST', `${ds.base}/search?limit=3`, {
      token: ds.dsToken,
      body: { image: `data:image/jpeg;base64,${query.toString('base64')}` },
    });
    expect(lens.status).toBe(200);
    expect(lens.body.results.map((r: { id: string }) => r.id)).toContain(`p${n}`);
  }
}, 300_000);
