/**
 * The console's ingestion progress in headless Chromium (issue 39, contract §17): the
 * organisation view follows its datasets over the `datasetEvents` subscription (a WebSocket to
 * the page's own /graphql, allowed by the page's `connect-src 'self'`), so pushed items show
 * their counts with no request for the dataset list; and when that socket fails, the view polls
 * the list every 3 s instead.
 */
import type { Page, Request } from 'playwright-core';
import { waitFor } from '../helpers/app';
import { openWatched, startConsoleRig, stopConsoleRig, type ConsoleRig } from './console-page';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;

const ORG = 'liveorg';
const N = 5;
let rig: ConsoleRig | undefined;

beforeAll(async () => {
  rig = await startConsoleRig(ORG, 'shop', (imgUrl) =>
    Array.from({ length: N }, (_, i) => ({
      id: `p-${i}`,
      url: `${imgUrl}/img/${i}.png`,
      metadata: { name: `Mug ${i}` },
    })),
  );
}, 120_000);

afterAll(() => stopConsoleRig(rig));

const listPath = `/orgs/${ORG}/datasets`;
const isListRequest = (r: Request) => new URL(r.url()).pathname === listPath;

/** The text of one count cell of the shop row. */
const count = (page: Page, name: string) =>
  page.locator(`tr[data-dataset="shop"] [data-count="${name}"]`).innerText();

/** Pushes `ids` (new items) to the shop dataset. */
async function push(ids: number[]): Promise<void> {
  const r = await rig!.t.call('POST', `${rig!.ds.base}/content`, {
    token: rig!.ds.orgToken,
    body: { content: ids.map((k) => ({ id: `q-${k}`, url: `${rig!.img.url}/img/${k}.png` })) },
  });
  expect(r.status).toBe(202);
}

const progressIs = (page: Page, state: string) =>
  page.waitForSelector(`.hint[data-progress="${state}"]`, { timeout: 15_000 });

const countIs = (page: Page, name: string, n: number) =>
  page.waitForFunction(
    ([name, n]) =>
      document.querySelector(`tr[data-dataset="shop"] [data-count="${name}"]`)?.textContent ===
      String(n),
    [name, n] as const,
    { timeout: 20_000 },
  );

test('pushed items show their counts over the subscription, without asking for the list', async () => {
  const { t } = rig!;
  // Listening from before the page loads: the socket opens as soon as the list is shown.
  const frames: string[] = [];
  const sockets: string[] = [];
  const lists: Request[] = [];
  const { page, errors, outside } = await openWatched(
    rig!.browser,
    `${t.url}/#token=${rig!.ds.orgToken}`,
    [t.url, rig!.img.url],
    1280,
    (p) => {
      p.on('websocket', (ws) => {
        sockets.push(ws.url());
        ws.on('framereceived', (f) => frames.push(String(f.payload)));
      });
      p.on('request', (r) => void (isListRequest(r) && lists.push(r)));
    },
  );
  await page.locator('tr[data-dataset="shop"]').waitFor();
  expect(await count(page, 'processed')).toBe(String(N));
  // Chromium accepted the same-origin socket under `connect-src 'self'` and the token.
  await progressIs(page, 'live');
  expect(sockets).toEqual([`${t.url.replace(/^http/, 'ws')}/graphql`]);
  const listsBefore = lists.length;

  const opened = Date.now();
  await push([100, 101, 102]);
  await countIs(page, 'processed', N + 3);
  expect(await count(page, 'items')).toBe(String(N + 3));
  expect(await count(page, 'pending')).toBe('0');
  // The list is asked for every 30 s while the socket is up: none of that in this short while.
  expect(Date.now() - opened).toBeLessThan(25_000);
  expect(lists.length).toBe(listsBefore);
  const last = frames
    .map((f) => JSON.parse(f) as { type: string; payload?: any })
    .filter((m) => m.type === 'next')
    .map((m) => m.payload.data.datasetEvents.counts.processed);
  expect(last).toContain(N + 3);

  expect(outside).toEqual([]);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('a socket that fails leaves the view polling the list every 3 s', async () => {
  const { t } = rig!;
  const page = await rig!.browser.newPage();
  // Every WebSocket to /graphql is closed at once, as by a proxy that refuses them.
  await page.routeWebSocket(/\/graphql$/, (ws) => ws.close({ code: 1011, reason: 'refused' }));
  const lists: number[] = [];
  page.on('request', (r) => void (isListRequest(r) && lists.push(Date.now())));
  await page.goto(`${t.url}/#token=${rig!.ds.orgToken}`);
  await page.locator('tr[data-dataset="shop"]').waitFor();
  await progressIs(page, 'down');

  const processed = Number(await count(page, 'processed'));
  await push([200]);
  await countIs(page, 'processed', processed + 1);
  await waitFor('three polls of the list', async () => lists.length >= 3, 20_000);
  const gaps = lists.slice(1).map((at, i) => at - lists[i]);
  expect(Math.max(...gaps.slice(-2))).toBeLessThan(10_000);
  await page.close();
}, 60_000);

test('more datasets than one socket may follow are followed over two sockets', async () => {
  const { t } = rig!;
  // The service allows 10 subscriptions per connection; the shop and ten more make 11.
  for (let k = 0; k < 10; k++) {
    const r = await t.call('POST', listPath, {
      token: rig!.ds.orgToken,
      body: { name: `more-${k}` },
    });
    expect(r.status).toBe(201);
  }
  const sockets: string[] = [];
  const { page, errors } = await openWatched(
    rig!.browser,
    `${t.url}/#token=${rig!.ds.orgToken}`,
    [t.url, rig!.img.url],
    1280,
    (p) => void p.on('websocket', (ws) => sockets.push(ws.url())),
  );
  await page.locator('tr[data-dataset="more-9"]').waitFor();
  await progressIs(page, 'live');
  expect(sockets).toHaveLength(2);
  const processed = Number(await count(page, 'processed'));
  await push([300]);
  await countIs(page, 'processed', processed + 1);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);
