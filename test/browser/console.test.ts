/**
 * The web console at `/` (issues 18 and 36) in headless Chromium, against a real server with a
 * published dataset: sign-in from a `#token=` link and by a token pasted into the form (keyboard
 * only), the image grid with tiles titled by name, facets and histogram ranges as edits of the
 * filter text, the view kept in the address (reload, shared link, back and forward), the detail
 * panel with similar items and explore, lens from a chosen and a dropped photo, the `q` error
 * marker, and the organisation view with live progress and its requests chart. No request
 * leaves the service and the image server, and no page logs an error. Each test makes the state
 * it checks, so any one runs alone.
 */
import Fastify from 'fastify';
import { ChildProcess } from 'node:child_process';
import { Socket, type AddressInfo } from 'node:net';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium } from './console-page';
import { consolePages } from '../../src/api/console/plugin';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;
declare const sessionStorage: any;
declare const DataTransfer: any;

const COLOURS = ['red', 'green', 'blue', 'black', 'white'];
const N = 210;
const docs = Array.from({ length: N }, (_, i) => ({
  id: `p-${String(i).padStart(3, '0')}`,
  colour: COLOURS[i % COLOURS.length],
  price: 5 + (i % 20) * 5,
}));

/** Each item's `name`, which titles its tile. */
const nameOf = (id: string) => `Mug ${Number(id.slice(2))}`;

let t: TestApp;
let img: ImageServer;
let browser: Browser;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'consoleorg', 'shop');
  const content = [
    ...docs.map((d, i) => ({
      id: d.id,
      url: `${img.url}/img/${i}.png`,
      metadata: { colour: d.colour, price: d.price, name: nameOf(d.id), title: `Product ${i}` },
    })),
    { id: 'z-broken', url: `${img.url}/missing.png`, metadata: { colour: 'red' } },
  ];
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, content.length, 90_000);
  browser = await launchChromium();
}, 150_000);

/** How long each teardown step may take; each takes well under a second when nothing is wrong. */
const STEP_MS = 30_000;

// A step that fails or does not finish in STEP_MS fails the suite, naming the step and what was
// still open; the later steps run either way, so nothing is left behind.
afterAll(async () => {
  const problems: string[] = [];
  for (const [what, step] of [
    ['closing Chromium', () => browser?.close()],
    ['stopping the service', () => t?.stop()],
    ['closing the image server', () => img?.close()],
  ] as const) {
    const problem = await bounded(what, step);
    if (problem) problems.push(problem);
  }
  if (problems.length) throw new Error(`teardown: ${problems.join('; ')}`);
}, 4 * STEP_MS);

/** Undefined once `step` is done; what went wrong if it failed or did not finish in time. */
async function bounded(what: string, step: () => unknown): Promise<string | undefined> {
  const late = Symbol('late');
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<typeof late>((resolve) => {
    timer = setTimeout(() => resolve(late), STEP_MS);
  });
  try {
    if ((await Promise.race([Promise.resolve().then(step), deadline])) === late)
      return `${what} did not finish in ${STEP_MS} ms; still open: ${stillOpen()}`;
    return undefined;
  } catch (e) {
    return `${what} failed: ${String(e)}`;
  } finally {
    clearTimeout(timer);
  }
}

/** The process's open handles; connections of the service and the image server by name. */
function stillOpen(): string {
  const named = new Map<number, string>();
  if (t) named.set(Number(new URL(t.url).port), 'service');
  if (img) named.set(Number(new URL(img.url).port), 'image server');
  const described: string[] = [];
  const counted = new Map<string, number>();
  for (const h of (process as unknown as { _getActiveHandles(): object[] })._getActiveHandles()) {
    if (h instanceof Socket && h.remotePort !== undefined) {
      const server = named.get(h.localPort ?? 0);
      const peer = named.get(h.remotePort);
      // a server's socket holds the response it is writing (Node's own field)
      const req = (h as { _httpMessage?: { req?: { method?: string; url?: string } } })._httpMessage
        ?.req;
      if (server) {
        described.push(
          `the ${server}'s connection from port ${h.remotePort} (${req ? `answering ${req.method} ${req.url}` : 'no request being answered'})`,
        );
        continue;
      }
      if (peer) {
        described.push(`a connection from port ${h.localPort} to the ${peer}`);
        continue;
      }
    }
    if (h instanceof ChildProcess) {
      described.push(`process ${h.pid} (${h.spawnfile})`);
      continue;
    }
    counted.set(h.constructor.name, (counted.get(h.constructor.name) ?? 0) + 1);
  }
  for (const [name, n] of counted) described.push(n > 1 ? `${n} × ${name}` : name);
  return described.join(', ') || 'no handle';
}

interface Watched {
  page: Page;
  /** Console errors and uncaught exceptions. */
  errors: string[];
  /** Requests to anywhere but the service and the image server. */
  outside: string[];
}

async function open(path: string, width = 1280): Promise<Watched> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const errors: string[] = [];
  const outside: string[] = [];
  const allowed = [new URL(t.url).origin, new URL(img.url).origin];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await page.route(
    (url) => !allowed.includes(url.origin) && url.protocol !== 'data:',
    (route) => {
      outside.push(route.request().url());
      return route.abort();
    },
  );
  const res = await page.goto(t.url + path);
  expect(res?.status()).toBe(200);
  return { page, errors, outside };
}

/** Chromium logs every 4xx response of fetch itself; only a test that provokes one expects it. */
const notHttp = (errors: string[], ...statuses: number[]) =>
  errors.filter(
    (e) => !statuses.some((s) => e.includes(`the server responded with a status of ${s}`)),
  );

/** Presses Tab until the element with this id has the focus, as a keyboard user gets there. */
async function tabTo(page: Page, id: string, most = 10): Promise<number> {
  for (let n = 1; n <= most; n++) {
    await page.keyboard.press('Tab');
    if ((await page.evaluate(() => document.activeElement?.id)) === id) return n;
  }
  throw new Error(`#${id} not reached in ${most} presses of Tab`);
}

const total = (page: Page) => page.locator('.results-head .total');
const grid = (page: Page) => page.locator('ul[aria-label="Catalogue"] .tile');

test('GET / serves the page with a strict CSP; assets are hashed and cached; no build → 503', async () => {
  const res = await fetch(`${t.url}/`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/html');
  expect(res.headers.get('cache-control')).toBe('no-cache');
  const csp = res.headers.get('content-security-policy') ?? '';
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("connect-src 'self'");
  expect(csp).toContain('img-src');
  const html = await res.text();
  const js = /\/console\/assets\/console-[\w-]+\.js/.exec(html)?.[0];
  expect(js).toBeDefined();
  const asset = await fetch(t.url + js);
  expect(asset.status).toBe(200);
  expect(asset.headers.get('content-type')).toContain('javascript');
  expect(asset.headers.get('cache-control')).toContain('immutable');
  const missing = await fetch(`${t.url}/console/assets/console-nope.js`);
  expect([missing.status, ((await missing.json()) as any).error.code]).toEqual([404, 'not_found']);

  // A server whose dist/web holds no console build explains itself instead of failing.
  const bare = Fastify();
  await bare.register(consolePages('/nonexistent/dist/web'));
  await bare.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { port } = bare.server.address() as AddressInfo;
    const r = await fetch(`http://127.0.0.1:${port}/`);
    expect(r.status).toBe(503);
    expect(await r.text()).toContain('npm run build');
  } finally {
    await bare.close();
  }
});

test('a #token= link signs in (the fragment is removed), shows the grid, and facets narrow it', async () => {
  const { page, errors, outside } = await open(`/#token=${ds.dsToken}`);
  await grid(page).first().waitFor();
  // The fragment is gone; the address names the dataset, never the token.
  expect(page.url()).toBe(`${t.url}/?dataset=shop`);
  expect(await page.evaluate(() => JSON.stringify(sessionStorage))).toContain(ds.dsToken);
  await expect(page.locator('.who').innerText()).resolves.toContain('consoleorg/shop');
  expect(await total(page).innerText()).toBe(String(N));
  expect(await grid(page).count()).toBe(24);
  // No `parent` field: items, not products, and no switch for variants.
  expect(await page.locator('#results-title').innerText()).toBe(`${N} items`);
  expect(await page.getByRole('switch').count()).toBe(0);
  // Images are the items' own URLs (the service keeps none).
  const src = await grid(page).first().locator('img').getAttribute('src');
  expect(src).toMatch(new RegExp(`^${img.url}/img/\\d+\\.png$`));

  const red = page.locator('fieldset[data-field="colour"] .facet-row', { hasText: 'red' });
  expect(await red.locator('.count').innerText()).toBe('42');
  await red.locator('input').check();
  await page.waitForFunction(() => document.querySelector('.total')?.textContent === '42');
  expect(await grid(page).count()).toBe(24);
  // Disjunctive counts: the other colours keep theirs, so a second one adds up.
  const blue = page.locator('fieldset[data-field="colour"] .facet-row', { hasText: 'blue' });
  expect(await blue.locator('.count').innerText()).toBe('42');
  await blue.locator('input').check();
  await page.waitForFunction(() => document.querySelector('.total')?.textContent === '84');

  // A numeric range, typed into the price fieldset.
  const price = page.locator('fieldset[data-field="price"]');
  expect(await price.locator('.histogram .bar').count()).toBeGreaterThan(1);
  await price.getByLabel('min').fill('10');
  await price.getByLabel('max').fill('20');
  await price.getByRole('button', { name: 'Set' }).click();
  const expected = docs.filter(
    (d) => ['red', 'blue'].includes(d.colour) && d.price >= 10 && d.price <= 20,
  ).length;
  await page.waitForFunction(
    (n) => document.querySelector('.total')?.textContent === String(n),
    expected,
  );
  const ids = await grid(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
  for (const id of ids) {
    const d = docs.find((x) => x.id === id)!;
    expect(['red', 'blue']).toContain(d.colour);
    expect(d.price).toBeGreaterThanOrEqual(10);
    expect(d.price).toBeLessThanOrEqual(20);
  }

  // Paging and sort.
  await page.getByRole('button', { name: 'Clear all filters' }).click();
  await page.waitForFunction((n) => document.querySelector('.total')?.textContent === String(n), N);
  await page.selectOption('#sort', 'price');
  await page.selectOption('#order', 'asc');
  await page.waitForFunction(
    () =>
      document.querySelector('ul[aria-label="Catalogue"] .tile')?.getAttribute('data-id') ===
      'p-000',
  );
  await page.getByRole('button', { name: 'Next →' }).click();
  await page.waitForFunction(
    () => document.querySelector('.pager span')?.textContent === 'Page 2 of 9',
  );

  expect(outside).toEqual([]);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('a token pasted into the sign-in form signs in, by keyboard alone, as organisation or dataset', async () => {
  const { page, errors, outside } = await open('/');
  await page.locator('#sign-in-title').waitFor();
  // A refused token says so and leaves the form to try again.
  expect(await tabTo(page, 'token')).toBeLessThanOrEqual(3);
  await page.keyboard.insertText('org_not-a-real-token'); // as a paste arrives: one input event
  await page.keyboard.press('Enter');
  await page.getByText('This token is not accepted').waitFor();

  expect(await tabTo(page, 'token')).toBeLessThanOrEqual(3);
  await page.keyboard.insertText(ds.orgToken);
  await page.keyboard.press('Enter');
  await page.locator('tr[data-dataset="shop"]').waitFor();
  await expect(page.locator('.who').innerText()).resolves.toBe('organisation consoleorg');
  expect(page.url()).toBe(`${t.url}/`);
  expect(await page.evaluate(() => JSON.stringify(sessionStorage))).toContain(ds.orgToken);
  expect(outside).toEqual([]);
  expect(notHttp(errors, 401)).toEqual([]);
  await page.close();

  const dsPage = await open('/');
  await dsPage.page.locator('#sign-in-title').waitFor();
  expect(await tabTo(dsPage.page, 'token')).toBeLessThanOrEqual(3);
  await dsPage.page.keyboard.insertText(ds.dsToken);
  await dsPage.page.keyboard.press('Enter');
  await grid(dsPage.page).first().waitFor();
  await expect(dsPage.page.locator('.who').innerText()).resolves.toBe('dataset consoleorg/shop');
  expect(dsPage.page.url()).toBe(`${t.url}/?dataset=shop`);
  expect(dsPage.outside).toEqual([]);
  expect(dsPage.errors).toEqual([]);
  await dsPage.page.close();
}, 60_000);

test('a histogram bar sets its range: the grid narrows to it and the q bar shows it', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await grid(page).first().waitFor();
  const price = page.locator('fieldset[data-field="price"]');
  const bars = price.locator('.histogram .bar');
  expect(await bars.count()).toBeGreaterThan(2);
  const bar = bars.nth(1);
  const [, from, to, count] = /from ([\d.]+) to ([\d.]+): (\d+) items/
    .exec((await bar.getAttribute('aria-label'))!)!
    .map(Number);
  // A bucket counts [from, to) (contract §10); the range it selects is q's inclusive from:to.
  expect(count).toBe(docs.filter((d) => d.price >= from && d.price < to).length);
  const inRange = docs.filter((d) => d.price >= from && d.price <= to);
  expect(inRange.length).toBeLessThan(N);

  await bar.click();
  await page.waitForFunction(
    (n) => document.querySelector('.total')?.textContent === String(n),
    inRange.length,
  );
  const ids = await grid(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
  expect(ids.length).toBeGreaterThan(0);
  for (const id of ids) expect(inRange.map((d) => d.id)).toContain(id);
  // The bar shows the condition the bar click wrote into the filter text.
  expect(await page.locator('#q-input').inputValue()).toBe(`price:${from}:${to}`);
  expect(await price.getByLabel('min').inputValue()).toBe(String(from));
  expect(await price.getByLabel('max').inputValue()).toBe(String(to));

  // "any" lifts the range again.
  await price.getByRole('button', { name: 'any' }).click();
  await page.waitForFunction((n) => document.querySelector('.total')?.textContent === String(n), N);
  expect(await page.locator('#q-input').inputValue()).toBe('');
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

const tile = (page: Page, n = 0) => grid(page).nth(n);
const ids = (page: Page) =>
  grid(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-id')!));
const facetBox = (page: Page, field: string, value: string) =>
  page
    .locator(`fieldset[data-field="${field}"] .facet-row`, { hasText: value })
    .locator('input[type="checkbox"]');
const waitTotal = (page: Page, n: number) =>
  page.waitForFunction((k) => document.querySelector('.total')?.textContent === String(k), n);
/** Waits for the grid to start with this item (the pager moves before the results arrive). */
const waitFirst = (page: Page, id: string) =>
  page.waitForFunction(
    (first) =>
      document.querySelector('ul[aria-label="Catalogue"] .tile')?.getAttribute('data-id') === first,
    id,
  );
const waitPage = (page: Page, text: string) =>
  page.waitForFunction((s) => document.querySelector('.pager span')?.textContent === s, text);

test('tiles are titled by name, the id secondary, the sort value labelled; the title field is a choice kept', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await tile(page).waitFor();
  const id = (await tile(page).getAttribute('data-id'))!;
  // `name` wins over `title` and the id; the id stays on the tile, in small type.
  expect(await tile(page).locator('.tile-title').innerText()).toBe(nameOf(id));
  expect(await tile(page).locator('.tile-id').innerText()).toBe(id);
  // Sorted by the service's own time, no figure stands unexplained under the tile.
  expect(await grid(page).locator('.tile-line').count()).toBe(0);

  // Sorted by a field, each tile names the field its number is.
  await page.selectOption('#sort', 'price');
  await page.selectOption('#order', 'asc');
  await page.waitForFunction(
    () =>
      document.querySelector('ul[aria-label="Catalogue"] .tile')?.getAttribute('data-id') ===
      'p-000',
  );
  const line = tile(page).locator('.tile-line');
  expect(await line.getAttribute('data-label')).toBe('price');
  expect(await line.innerText()).toBe('price: 5');

  // The title field is a select of the dataset's text fields; the choice is kept on reload.
  const options = await page.locator('#title-field option').allTextContents();
  expect(options).toEqual(expect.arrayContaining(['name', 'title', 'colour', 'id']));
  expect(options).not.toContain('price');
  await page.selectOption('#title-field', 'title');
  await page.waitForFunction(() =>
    document
      .querySelector('ul[aria-label="Catalogue"] .tile-title')
      ?.textContent?.startsWith('Product '),
  );
  expect(page.url()).toContain('title=title');
  await page.reload();
  await tile(page).waitFor();
  expect(await tile(page).locator('.tile-title').innerText()).toBe(
    `Product ${Number((await tile(page).getAttribute('data-id'))!.slice(2))}`,
  );
  expect(await page.locator('#title-field').inputValue()).toBe('title');
  // The id as the title: shown once.
  await page.selectOption('#title-field', 'id');
  await page.waitForFunction(() => {
    const first = document.querySelector('ul[aria-label="Catalogue"] .tile');
    return first?.querySelector('.tile-title')?.textContent === first?.getAttribute('data-id');
  });
  expect(await tile(page).locator('.tile-id').count()).toBe(0);

  // Remembered in this browser: the bare address (no title in it) titles by the last choice.
  await page.goto(`${t.url}/`);
  await tile(page).waitFor();
  expect(await page.locator('#title-field').inputValue()).toBe('id');
  expect(await tile(page).locator('.tile-title').innerText()).toBe(
    await tile(page).getAttribute('data-id'),
  );
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('the filter text and the facet boxes are one state', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await tile(page).waitFor();
  const input = page.locator('#q-input');

  // Typed and applied, a filter ticks the box it names.
  await input.fill('colour:red');
  await input.press('Enter');
  await waitTotal(page, 42);
  expect(await facetBox(page, 'colour', 'red').isChecked()).toBe(true);
  expect(await facetBox(page, 'colour', 'blue').isChecked()).toBe(false);

  // Ticking a box edits the text (and the grid follows it).
  await facetBox(page, 'colour', 'blue').check();
  await waitTotal(page, 84);
  expect(await input.inputValue()).toBe('colour:red|blue');
  await facetBox(page, 'colour', 'red').uncheck();
  await waitTotal(page, 42);
  expect(await input.inputValue()).toBe('colour:blue');
  for (const id of await ids(page)) expect(docs.find((d) => d.id === id)?.colour).toBe('blue');

  // The other text is kept as typed; a box adds its clause after it.
  await input.fill('text:mug,price:10:20');
  await input.press('Enter');
  const cheap = docs.filter((d) => d.price >= 10 && d.price <= 20);
  await waitTotal(page, cheap.length);
  expect(await page.locator('fieldset[data-field="price"]').getByLabel('min').inputValue()).toBe(
    '10',
  );
  await facetBox(page, 'colour', 'green').check();
  await waitTotal(page, cheap.filter((d) => d.colour === 'green').length);
  expect(await input.inputValue()).toBe('text:mug,price:10:20,colour:green');

  // Typing removes the clause: the box unticks.
  await input.fill('text:mug,price:10:20');
  await input.press('Enter');
  await waitTotal(page, cheap.length);
  expect(await facetBox(page, 'colour', 'green').isChecked()).toBe(false);

  // A condition the boxes cannot show (an exclusion) stays text; the boxes leave it alone.
  await input.fill('colour:!red');
  await input.press('Enter');
  await waitTotal(page, N - 42);
  const colour = page.locator('fieldset[data-field="colour"]');
  await colour.getByText('Filtered in the text above').waitFor();
  for (const c of COLOURS) {
    expect(await facetBox(page, 'colour', c).isChecked()).toBe(false);
    expect(await facetBox(page, 'colour', c).isDisabled()).toBe(true);
  }
  expect(await input.inputValue()).toBe('colour:!red');
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('the address keeps dataset, filter, sort and page: reload, a shared link, back and forward', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await tile(page).waitFor();
  const green = docs
    .filter((d) => d.colour === 'green')
    .sort((a, b) => a.price - b.price || (a.id < b.id ? -1 : 1));
  await page.fill('#q-input', 'colour:green');
  await page.press('#q-input', 'Enter');
  await waitTotal(page, green.length);
  await page.selectOption('#sort', 'price');
  await page.selectOption('#order', 'asc');
  await waitFirst(page, green[0].id);
  await page.getByRole('button', { name: 'Next →' }).click();
  await waitPage(page, 'Page 2 of 2');
  await waitFirst(page, green[24].id);
  const address = new URL(page.url());
  expect(Object.fromEntries(address.searchParams)).toEqual({
    dataset: 'shop',
    q: 'colour:green',
    sort: 'price',
    order: 'asc',
    page: '2',
  });
  expect(page.url()).not.toContain(ds.dsToken);
  expect(address.hash).toBe('');

  // A reload shows the same page, the filter in the bar and its box ticked.
  await page.reload();
  await waitPage(page, 'Page 2 of 2');
  expect((await ids(page))[0]).toBe(green[24].id);
  expect(await page.locator('#q-input').inputValue()).toBe('colour:green');
  expect(await facetBox(page, 'colour', 'green').isChecked()).toBe(true);
  expect(await page.locator('#sort').inputValue()).toBe('price');
  expect(await page.locator('#order').inputValue()).toBe('asc');

  // Back steps through what was done: page 1, then the order, the sort, the filter.
  await page.goBack();
  await waitPage(page, 'Page 1 of 2');
  await waitFirst(page, green[0].id);
  await page.goBack();
  await page.waitForFunction(() => document.querySelector('#order')?.value === 'desc');
  await page.goBack();
  await page.waitForFunction(() => document.querySelector('#sort')?.value === 'service_updated_at');
  await page.goBack();
  await waitTotal(page, N);
  expect(await page.locator('#q-input').inputValue()).toBe('');
  expect(await facetBox(page, 'colour', 'green').isChecked()).toBe(false);
  await page.goForward();
  await waitTotal(page, green.length);
  expect(await page.locator('#q-input').inputValue()).toBe('colour:green');
  await page.close();

  // A shared link (an organisation's token this time, in the fragment) opens the same view.
  const shared = await open(`${address.pathname}${address.search}#token=${ds.orgToken}`);
  await waitPage(shared.page, 'Page 2 of 2');
  expect((await ids(shared.page))[0]).toBe(green[24].id);
  expect(await shared.page.locator('#q-input').inputValue()).toBe('colour:green');
  expect(shared.page.url()).toBe(address.href);
  // Back to the datasets is a step of its own; back again returns to the catalogue's view.
  await shared.page.getByRole('button', { name: '← Datasets' }).click();
  await shared.page.locator('tr[data-dataset="shop"]').waitFor();
  expect(shared.page.url()).toBe(`${t.url}/`);
  await shared.page.goBack();
  await waitPage(shared.page, 'Page 2 of 2');
  expect(await shared.page.locator('#q-input').inputValue()).toBe('colour:green');
  expect(shared.errors).toEqual([]);
  await shared.page.close();
  expect(errors).toEqual([]);
}, 90_000);

test('an item opens its details with similar items; explore goes on; Escape closes', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await grid(page).first().waitFor();
  const first = grid(page).first();
  const id = await first.getAttribute('data-id');
  await first.click();
  const panel = page.getByRole('dialog');
  await panel.getByRole('heading', { level: 2, name: nameOf(id!), exact: true }).waitFor();
  await expect(panel.locator('.detail-id').innerText()).resolves.toBe(`id ${id}`);
  const similar = panel.locator('ul[aria-label^="Items similar to"] .tile');
  await similar.first().waitFor();
  expect(await similar.count()).toBe(12);
  expect(
    await similar.evaluateAll((els) => els.map((e) => e.getAttribute('data-id'))),
  ).not.toContain(id);
  await expect(panel.locator('table.meta').innerText()).resolves.toContain('colour');

  await panel.getByRole('button', { name: 'Explore from here' }).click();
  const journey = panel.locator('ul[aria-label="Next step of the journey"] .tile');
  await journey.first().waitFor();
  const next = await journey.first().getAttribute('data-id');
  await journey.first().click();
  await page.waitForFunction(() => document.querySelectorAll('.journey-steps li').length === 2);
  await expect(panel.locator('.journey-steps').innerText()).resolves.toContain(nameOf(next!));

  // A similar item replaces the shown one.
  const other = await similar.first().getAttribute('data-id');
  await similar.first().click();
  // The panel re-renders once the item's details arrive; wait for it rather than read at once.
  await panel.getByRole('heading', { level: 2, name: nameOf(other!), exact: true }).waitFor();

  await page.keyboard.press('Escape');
  await expect(panel.waitFor({ state: 'detached' })).resolves.toBeUndefined();
  // Focus goes back to the tile that opened the panel.
  expect(await page.evaluate(() => document.activeElement?.getAttribute('data-id'))).toBe(id);

  // Keyboard only: Enter on the focused tile opens it again.
  await page.keyboard.press('Enter');
  await panel.locator('h2').waitFor();
  await page.keyboard.press('Escape');
  await panel.waitFor({ state: 'detached' });
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('lens: a chosen photo and a dropped photo find the item with that picture', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await grid(page).first().waitFor();
  const results = page.locator('ul[aria-label="Items similar to the photo"] .tile');
  const topIds = () =>
    results.evaluateAll((els) => els.slice(0, 3).map((e) => e.getAttribute('data-id')));

  await page.locator('[data-testid="lens-input"]').setInputFiles({
    name: 'photo.png',
    mimeType: 'image/png',
    buffer: await makeImage(7),
  });
  await results.first().waitFor();
  expect(await topIds()).toContain('p-007');
  await page.getByRole('button', { name: 'Back to the catalogue' }).click();
  await grid(page).first().waitFor();

  // Dropped anywhere on the page (a DataTransfer holding a File, as a real drop carries).
  const b64 = (await makeImage(42)).toString('base64');
  const dt = await page.evaluateHandle((data) => {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const transfer = new DataTransfer();
    transfer.items.add(new File([bytes], 'dropped.png', { type: 'image/png' }));
    return transfer;
  }, b64);
  await page.dispatchEvent('main', 'dragenter', { dataTransfer: dt });
  await page.locator('.drop-overlay').waitFor();
  await page.dispatchEvent('main', 'drop', { dataTransfer: dt });
  await page.waitForFunction(() =>
    [...document.querySelectorAll('ul[aria-label="Items similar to the photo"] .tile')]
      .slice(0, 3)
      .some((e) => e.getAttribute('data-id') === 'p-042'),
  );
  expect(await page.locator('.drop-overlay').count()).toBe(0);
  expect(await page.locator('.lens-query img').getAttribute('src')).toMatch(/^data:image\/jpeg/);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('a malformed q shows its error position under the offending character', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`);
  await grid(page).first().waitFor();
  const q = 'colour:red,price:abc:50';
  await page.fill('#q-input', q);
  await page.getByRole('button', { name: 'Apply' }).click();
  const mark = page.locator('.q-error .q-mark');
  await mark.waitFor();
  const pos = q.indexOf('abc');
  expect(await mark.getAttribute('data-position')).toBe(String(pos));
  expect(await mark.innerText()).toBe('a');
  await expect(page.locator('.q-error').innerText()).resolves.toContain('not a number');
  // The caret is drawn under the marked character, and the cursor is put on it.
  const offset = await page.evaluate((p) => {
    const caret = document.querySelector('.q-caret')!.firstChild!;
    const r = document.createRange();
    r.setStart(caret, p);
    r.setEnd(caret, p + 1);
    const m = document.querySelector('.q-mark')!.getBoundingClientRect();
    return {
      dx: Math.abs(r.getBoundingClientRect().left - m.left),
      below: r.getBoundingClientRect().top >= m.bottom - 1,
    };
  }, pos);
  expect(offset.dx).toBeLessThan(1.5);
  expect(offset.below).toBe(true);
  expect(await page.evaluate(() => document.activeElement.selectionStart)).toBe(pos);

  // Fixed, the error goes and the grid follows.
  await page.fill('#q-input', 'colour:red,price:50:');
  await page.getByRole('button', { name: 'Apply' }).click();
  await mark.waitFor({ state: 'detached' });
  const expected = docs.filter((d) => d.colour === 'red' && d.price >= 50).length;
  await page.waitForFunction(
    (n) => document.querySelector('.total')?.textContent === String(n),
    expected,
  );
  expect(notHttp(errors, 400)).toEqual([]);
  await page.close();
}, 60_000);

test('an organisation token sees its datasets with live progress, errors and usage, and manages them', async () => {
  // Requests of its own for the chart: collection requests, which no other test here makes.
  for (let k = 0; k < 3; k++) {
    const r = await t.call('GET', `${ds.base}/collection?ids=p-001,p-002&limit=2`, {
      token: ds.dsToken,
    });
    expect(r.status).toBe(200);
  }
  // Each API host batches its request log: the report shows them a moment later.
  await waitFor('the collection requests in the analytics report', async () => {
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const r = await t.call('GET', `${ds.base}/analytics?from=${from}&interval=day`, {
      token: ds.orgToken,
    });
    const intervals: Array<{ requests: Record<string, number> }> = r.body.analytics.intervals;
    return intervals.reduce((n, i) => n + (i.requests.collection ?? 0), 0) === 3;
  });

  const { page, errors, outside } = await open(`/#token=${ds.orgToken}`, 1280);
  expect(page.url()).toBe(`${t.url}/`);
  const row = page.locator('tr[data-dataset="shop"]');
  await row.waitFor();
  const cell = (name: string) => row.locator(`[data-count="${name}"]`);
  expect(await cell('items').innerText()).toBe(String(N + 1));
  expect(await cell('processed').innerText()).toBe(String(N));
  expect(await cell('errors').innerText()).toBe('1');
  expect(await row.locator('.badge').innerText()).toBe('published');

  // Processing errors with their codes; usage; requests chart.
  const admin = page.locator('section.admin[data-dataset="shop"]');
  await admin.locator('table.errors').waitFor();
  await expect(admin.locator('table.errors').innerText()).resolves.toContain('not_found');
  await expect(admin.locator('table.errors').innerText()).resolves.toContain('z-broken');
  await page.locator('#usage-title').waitFor();
  await page.locator('.meter').first().waitFor();
  await admin.locator('.chart svg[role="img"]').waitFor();
  await admin.locator('.chart .legend li', { hasText: 'collection (3)' }).waitFor();
  const bars = admin.locator('.chart rect title');
  expect(await bars.evaluateAll((els) => els.map((e) => e.textContent))).toContainEqual(
    expect.stringMatching(/ · collection: 3$/),
  );

  // Live: items pushed now show up without a reload.
  const more = [0, 1, 2].map((k) => ({ id: `q-${k}`, url: `${img.url}/img/${300 + k}.png` }));
  await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content: more } });
  await page.waitForFunction(
    (n) =>
      document.querySelector('tr[data-dataset="shop"] [data-count="items"]')?.textContent ===
      String(n),
    N + 4,
    { timeout: 15_000 },
  );
  await page.waitForFunction(
    (n) =>
      document.querySelector('tr[data-dataset="shop"] [data-count="processed"]')?.textContent ===
      String(n),
    N + 3,
    { timeout: 30_000 },
  );

  // A new dataset: created, selected; fields enabled; browse token rotated.
  await page.fill('#new-dataset', 'fresh');
  await page.getByRole('button', { name: 'Create' }).click();
  const fresh = page.locator('section.admin[data-dataset="fresh"]');
  await fresh.waitFor();
  await page.locator('tr[data-dataset="fresh"] .badge', { hasText: 'pending' }).waitFor();
  await fresh.locator('textarea').fill('{ "tags": ["*"] }');
  await fresh.getByRole('button', { name: 'Save fields' }).click();
  await fresh.getByText('Saved (version 2).').waitFor();
  const before = (await t.call('GET', '/orgs/consoleorg/datasets/fresh', { token: ds.orgToken }))
    .body.dataset.browse_token;
  await fresh.getByRole('button', { name: 'Rotate browse token…' }).click();
  await fresh.getByRole('button', { name: 'Rotate now' }).click();
  await fresh.getByText('New browse token issued').waitFor();
  const after = (await t.call('GET', '/orgs/consoleorg/datasets/fresh', { token: ds.orgToken }))
    .body.dataset;
  expect(after.browse_token).not.toBe(before);
  expect(after.settings.fields).toEqual({ tags: ['*'] });
  expect(await fresh.locator('[data-testid="browse-token"]').inputValue()).toBe(after.browse_token);

  // A dataset below 200 processed items: the catalogue says so and waits (asking through
  // GraphQL, so no failed request shows up in the browser console).
  await page.locator('tr[data-dataset="fresh"]').getByRole('button', { name: 'Browse' }).click();
  await page.locator('.notice', { hasText: 'Search opens once' }).waitFor();
  await page.getByRole('button', { name: '← Datasets' }).click();

  // Browse opens the catalogue with the dataset's browse token.
  await row.getByRole('button', { name: 'Browse' }).click();
  await grid(page).first().waitFor();
  expect(await total(page).innerText()).toBe(String(N + 3));
  await page.getByRole('button', { name: '← Datasets' }).click();
  await row.waitFor();

  expect(outside).toEqual([]);
  expect(errors).toEqual([]);
  await page.close();
}, 90_000);

test('phone width: the grid, the filters behind a toggle and the detail panel fit 375 px', async () => {
  const { page, errors } = await open(`/#token=${ds.dsToken}`, 375);
  await grid(page).first().waitFor();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
  const toggle = page.getByRole('button', { name: /^Filters/ });
  expect(await page.locator('fieldset[data-field="colour"]').isVisible()).toBe(false);
  await toggle.click();
  expect(await page.locator('fieldset[data-field="colour"]').isVisible()).toBe(true);
  await grid(page).first().click();
  const panel = page.getByRole('dialog');
  await panel.locator('ul[aria-label^="Items similar to"] .tile').first().waitFor();
  const box = await panel.boundingBox();
  expect(box?.width).toBeLessThanOrEqual(375);
  await panel.getByRole('button', { name: 'Close details' }).click();
  await panel.waitFor({ state: 'detached' });
  expect(errors).toEqual([]);
  await page.close();

  const org = await open(`/#token=${ds.orgToken}`, 375);
  await org.page.locator('tr[data-dataset="shop"]').getByRole('button', { name: 'shop' }).click();
  await org.page.locator('table.errors').waitFor();
  await org.page.locator('.meter').first().waitFor();
  expect(await org.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(
    375,
  );
  expect(org.errors).toEqual([]);
  await org.page.close();
}, 60_000);
