/**
 * The demo's progress feed (src/cli/progress-feed.ts, issue 39): the dataset's counts come over
 * the `datasetEvents` subscription, with no read of the dataset while events flow; a socket that
 * is refused (a bad token: close 4403) or cannot connect leaves the feed polling GET dataset.
 */
import { ProgressFeed, type Progress } from '../../src/cli/progress-feed';
import { setupDataset, startTestApp, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
const feeds: ProgressFeed[] = [];

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'demoorg', 'food');
}, 120_000);
afterAll(async () => {
  for (const f of feeds) f.close();
  await t.stop();
  await img.close();
});

/** A feed of demoorg/food with `token`, counting its reads of the dataset. */
async function open(token: string, url = `${t.url.replace(/^http/, 'ws')}/graphql`) {
  const reads = { n: 0 };
  const feed = await ProgressFeed.open({
    url,
    token,
    organisation: 'demoorg',
    dataset: 'food',
    read: async () => {
      reads.n++;
      return (await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset as Progress;
    },
    pollMs: 100,
  });
  feeds.push(feed);
  return { feed, reads };
}

const push = (ids: string[]) =>
  t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: ids.map((id, i) => ({ id, url: `${img.url}/img/${i + 1}.png` })) },
  });

test('follows the counts over the subscription until every item is handled', async () => {
  const { feed, reads } = await open(ds.orgToken);
  const ids = Array.from({ length: 30 }, (_, i) => `p-${i}`);
  expect((await push(ids)).status).toBe(202);
  let last: Progress;
  let fromEvents = 0;
  for (;;) {
    const before = reads.n;
    last = await feed.next();
    // A read happens only after 2 s without an event (the embedder's first image is slow).
    if (reads.n === before) fromEvents++;
    if (last.counts.processed + last.counts.errors >= ids.length) break;
  }
  feed.close();
  expect(last.counts).toEqual({ items: 30, processed: 30, pending: 0, errors: 0 });
  expect(last.status).toBe('pending');
  expect(fromEvents).toBeGreaterThan(0);
});

test('a refused token or an unreachable socket leaves the feed polling the dataset', async () => {
  for (const { feed, reads } of [
    await open('org_not_a_token'),
    await open(ds.orgToken, 'ws://127.0.0.1:1/graphql'),
  ]) {
    const first = reads.n;
    const started = Date.now();
    expect((await feed.next()).counts).toEqual(
      (await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset.counts,
    );
    await feed.next();
    expect(reads.n).toBe(first + 2);
    // Polling every 100 ms, not waiting 2 s for events that cannot come.
    expect(Date.now() - started).toBeLessThan(1500);
  }
});
