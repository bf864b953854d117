/**
 * Webhooks end to end (contract §17) on the engine TEST_SEARCH_BACKEND names: a receiver on
 * loopback verifies every signature with the Standard Webhooks library and gets every
 * processed id, the failures with their codes, and dataset.published once.
 */
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import {
  startWebhookReceiver,
  type WebhookReceiver,
  webhookTestEnv,
} from '../helpers/webhook-receiver';

jest.setTimeout(120_000);

let t: TestApp;
let img: ImageServer;
let rx: WebhookReceiver;

beforeAll(async () => {
  img = await startImageServer();
  rx = await startWebhookReceiver();
  t = await startTestApp(webhookTestEnv(img.url, [rx]));
});
afterAll(async () => {
  await t?.stop();
  await img?.close();
  await rx?.close();
});

test('every processed id, the failures and one dataset.published reach a verifying receiver', async () => {
  const ds = await setupDataset(t, 'hooks', 'shoes');
  const made = await t.call('POST', '/orgs/hooks/webhooks', {
    token: ds.orgToken,
    body: { url: rx.url, events: ['items.processed', 'items.failed', 'dataset.published'] },
  });
  expect(made.status).toBe(201);
  expect(made.body.secret).toMatch(/^whsec_/);
  expect(made.body.webhook).toMatchObject({ url: rx.url, state: 'active', datasets: null });
  rx.secret = made.body.secret;
  // the directory workers route by is read once a second
  await new Promise((r) => setTimeout(r, 1100));
  const ids = Array.from({ length: 260 }, (_, i) => `p${i}`);
  const content = ids.map((id, i) => ({ id, url: `${img.url}/img/${i}.png` }));
  content.push({ id: 'bad1', url: `${img.url}/missing.png` });
  const pushed = await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content },
  });
  expect(pushed.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, 261);
  const seen = await waitFor('every processed id delivered', async () => {
    const got = new Set(
      rx
        .delivered()
        .filter((r) => r.body.type === 'items.processed')
        .flatMap((r) => r.body.data.ids as string[]),
    );
    return ids.every((id) => got.has(id)) && got;
  });
  expect(seen.size).toBe(260);
  const failed = await waitFor('the failure delivered', async () =>
    rx.delivered().find((r) => r.body.type === 'items.failed'),
  );
  expect(failed.body.data).toMatchObject({
    organisation: 'hooks',
    dataset: 'shoes',
    errors: [{ id: 'bad1', code: expect.any(String), message: expect.any(String) }],
  });
  const published = await waitFor('dataset.published', async () =>
    rx.delivered().filter((r) => r.body.type === 'dataset.published'),
  );
  expect(published).toHaveLength(1);
  expect(published[0]!.body.data.counts.processed).toBeGreaterThanOrEqual(200);
  expect(rx.received.every((r) => r.verified)).toBe(true);
  const log = await t.call('GET', `/orgs/hooks/webhooks/${made.body.webhook.id}/deliveries`, {
    token: ds.orgToken,
  });
  expect(log.status).toBe(200);
  expect(log.body.deliveries.length).toBeGreaterThanOrEqual(3);
  expect(log.body.deliveries.every((d: { state: string }) => d.state === 'delivered')).toBe(true);
});
