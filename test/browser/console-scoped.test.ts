/**
 * Scoped links in the console (issue 38, contract §16) in headless Chromium, against a real
 * server: an organisation user mints one with the dataset admin's "Share a scoped link" form (a
 * filter, an expiry, the request types, the fields shown) and gets a `#token=st_…&org=…&dataset=…`
 * link; a fresh page opened on it shows the catalogue only (no organisation or admin screen),
 * exactly the items the REST API gives that token, and when it expires. A token allowing only
 * `search` offers no similar items, explore or search by photo; an expired token, a token that
 * expires while open, a forged one, one opened on another dataset and a rate-limited one each say
 * so instead of showing a broken page. A bad payload shows the API's 400 naming the field.
 */
import crypto from 'node:crypto';
import type { Browser, Page, Request } from 'playwright-core';
import type { TestApp } from '../helpers/app';
import type { ImageServer } from '../helpers/image-server';
import { openWatched, startConsoleRig, stopConsoleRig, type ConsoleRig } from './console-page';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;

const COLOURS = ['red', 'green', 'blue', 'black', 'white'];
const N = 210;
const docs = Array.from({ length: N }, (_, i) => ({
  id: `p-${String(i).padStart(3, '0')}`,
  colour: COLOURS[i % COLOURS.length],
  price: 5 + (i % 20) * 5,
  name: `Mug ${i}`,
}));
const byId = new Map(docs.map((d) => [d.id, d]));
const RED = docs.filter((d) => d.colour === 'red').length;

let t: TestApp;
let img: ImageServer;
let browser: Browser;
let ds: ConsoleRig['ds'];
let rig: ConsoleRig | undefined;

beforeAll(async () => {
  rig = await startConsoleRig('scopedorg', 'shop', (imgUrl) =>
    docs.map((d, i) => ({
      id: d.id,
      url: `${imgUrl}/img/${i}.png`,
      metadata: { colour: d.colour, price: d.price, name: d.name },
    })),
  );
  ({ t, img, ds, browser } = rig);
}, 150_000);

afterAll(() => stopConsoleRig(rig), 60_000);

const open = (path: string) => openWatched(browser, t.url + path, [t.url, img.url]);

/** Chromium logs every 4xx response of fetch itself; only a test that provokes one expects it. */
const notHttp = (errors: string[], ...statuses: number[]) =>
  errors.filter(
    (e) => !statuses.some((s) => e.includes(`the server responded with a status of ${s}`)),
  );

const grid = (page: Page) => page.locator('ul[aria-label="Catalogue"] .tile');
const tileIds = (page: Page) =>
  grid(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-id') as string));

/** A scoped token signed with `key` (contract §16). */
const sign = (key: string, payload: Record<string, unknown>): string => {
  const p = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `st_${p}.${crypto.createHmac('sha256', key).update(p).digest('base64url')}`;
};

/** A scoped token minted here with the dataset's key, for scopes the form won't make. */
async function mintLocally(payload: Record<string, unknown>): Promise<string> {
  const r = await t.call('GET', `${ds.base}/scoped-key`, { token: ds.orgToken });
  expect(r.status).toBe(200);
  const key: string = r.body.key;
  expect(key).toMatch(/^sk_/);
  return sign(key, payload);
}
const linkFor = (token: string) =>
  `/#${new URLSearchParams({ token, org: 'scopedorg', dataset: 'shop' }).toString()}`;

/**
 * Fills the dataset admin's share form and returns the link it shows. `types`: the request types
 * left ticked (all by default).
 */
async function shareLink(
  page: Page,
  opts: { q?: string; expiry?: string; types?: string[]; fields?: string },
): Promise<string> {
  const form = page.locator('section.admin[data-dataset="shop"] form.scoped-share');
  await form.waitFor();
  await form.locator('#scoped-q-input').fill(opts.q ?? '');
  if (opts.expiry) await form.locator('#scoped-exp').selectOption(opts.expiry);
  for (const box of await form.locator('input[name="types"]').all()) {
    const type = (await box.getAttribute('value'))!;
    await box.setChecked(!opts.types || opts.types.includes(type));
  }
  await form.locator('#scoped-fields').fill(opts.fields ?? '');
  await form.getByRole('button', { name: 'Make link' }).click();
  const link = form.locator('#scoped-link');
  await link.waitFor();
  return link.inputValue();
}

/** The token and the hints of a console link. */
function parseLink(link: string): { token: string; org: string | null; dataset: string | null } {
  const u = new URL(link);
  const p = new URLSearchParams(u.hash.slice(1));
  return { token: p.get('token')!, org: p.get('org'), dataset: p.get('dataset') };
}

const payloadOf = (token: string) =>
  JSON.parse(Buffer.from(token.slice(3).split('.')[0], 'base64url').toString('utf8'));

test('an organisation user shares a filtered link; it opens the catalogue alone, with only what the token sees', async () => {
  const admin = await open(`/#token=${ds.orgToken}`);
  const before = Math.floor(Date.now() / 1000);
  const link = await shareLink(admin.page, { q: 'colour:red', expiry: '3600' });
  const after = Math.floor(Date.now() / 1000);
  expect(link.startsWith(`${t.url}/#token=st_`)).toBe(true);
  const { token, org, dataset } = parseLink(link);
  expect([org, dataset]).toEqual(['scopedorg', 'shop']);
  // The payload is what the form said: the filter, an hour, every type (no `types`).
  const payload = payloadOf(token);
  expect(payload.q).toBe('colour:red');
  expect(payload.exp).toBeGreaterThanOrEqual(before + 3600);
  expect(payload.exp).toBeLessThanOrEqual(after + 3600);
  expect(payload.types).toBeUndefined();
  expect(admin.errors).toEqual([]);
  expect(admin.outside).toEqual([]);
  await admin.page.close();

  // What the API gives this token: the red items only.
  const rest = await t.call(
    'GET',
    `${ds.base}/search?limit=24&sort=service_updated_at&order=desc&fields=*`,
    { token },
  );
  expect(rest.status).toBe(200);
  expect(rest.body.total_results).toBe(RED);
  const restIds = (rest.body.results as Array<{ id: string }>).map((r) => r.id);

  // A fresh page (a new browser context: nothing of the organisation's session).
  const { page, errors, outside } = await open(new URL(link).pathname + new URL(link).hash);
  await grid(page).first().waitFor();
  expect(page.url()).toBe(`${t.url}/?dataset=shop`);
  await page.waitForFunction(
    (n) => document.querySelector('.total')?.textContent === String(n),
    RED,
  );
  const ids = await tileIds(page);
  expect(ids).toEqual(restIds);
  for (const id of ids) expect(byId.get(id)?.colour).toBe('red');
  // The facets count within the scope too: red alone.
  const colours = page.locator('fieldset[data-field="colour"] .facet-row');
  await colours.first().waitFor();
  expect(await colours.count()).toBe(1);
  expect(await colours.first().innerText()).toContain('red');
  // The notice says what the link shows and until when; the header, what signed in.
  const notice = page.locator('[data-testid="scope-notice"]');
  await expect(notice.innerText()).resolves.toContain('colour:red');
  expect(
    Number(await notice.locator('[data-testid="scope-expires"]').getAttribute('data-exp')),
  ).toBe(payload.exp);
  await expect(page.locator('.who').innerText()).resolves.toContain('scopedorg/shop');
  // No organisation or admin screen, and no way back to one.
  expect(await page.locator('section.admin').count()).toBe(0);
  expect(await page.locator('tr[data-dataset]').count()).toBe(0);
  expect(await page.getByRole('button', { name: '← Datasets' }).count()).toBe(0);
  expect(await page.locator('#datasets-title').count()).toBe(0);
  // The token is refused on the admin API anyway.
  expect((await t.call('GET', ds.base, { token })).status).toBe(403);

  // Every type allowed: the detail panel offers similar items and explore, and photo search is there.
  await grid(page).first().click();
  await page.locator('#similar-title').waitFor();
  await page.getByRole('button', { name: 'Explore from here' }).waitFor();
  await page.locator('ul[aria-label^="Items similar to"] .tile').first().waitFor();
  const similar = await page
    .locator('ul[aria-label^="Items similar to"] .tile')
    .evaluateAll((els) => els.map((e) => e.getAttribute('data-id') as string));
  for (const id of similar) expect(byId.get(id)?.colour).toBe('red');
  expect(await page.locator('[data-testid="lens-input"]').count()).toBe(1);

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 90_000);

test('a link allowing only search offers no similar items, explore or photo search, and hides unlisted fields', async () => {
  const admin = await open(`/#token=${ds.orgToken}`);
  const link = await shareLink(admin.page, {
    q: 'colour:blue',
    expiry: String(24 * 3600),
    types: ['search'],
    fields: 'name, colour',
  });
  await admin.page.close();
  const { token } = parseLink(link);
  expect(payloadOf(token).types).toEqual(['search']);
  expect(payloadOf(token).fields).toEqual(['name', 'colour']);
  // The API refuses what the console must not offer.
  const refused = await t.call('GET', `${ds.base}/similar?id=p-002`, { token });
  expect([refused.status, refused.body.error.code]).toEqual([403, 'forbidden']);

  const { page, errors, outside } = await open(new URL(link).pathname + new URL(link).hash);
  const asked: Request[] = [];
  page.on('request', (r) => asked.push(r));
  await grid(page).first().waitFor();
  await page.waitForFunction(
    (n) => document.querySelector('.total')?.textContent === String(n),
    docs.filter((d) => d.colour === 'blue').length,
  );
  await expect(page.locator('[data-testid="scope-notice"]').innerText()).resolves.toContain(
    'Allows search',
  );
  expect(await page.locator('[data-testid="lens-input"]').count()).toBe(0);

  await grid(page).first().click();
  const panel = page.locator('.detail');
  await panel.locator('#detail-title').waitFor();
  // The item's fields: only those the token shows.
  const rows = await panel.locator('table.meta th').allInnerTexts();
  expect(rows).toContain('colour');
  expect(rows).not.toContain('price');
  expect(await panel.locator('#similar-title').count()).toBe(0);
  expect(await panel.getByRole('switch', { name: 'Vary the results' }).count()).toBe(0);
  expect(await panel.getByRole('button', { name: 'Explore from here' }).count()).toBe(0);
  // No request the token forbids was even tried.
  const paths = asked.map((r) => new URL(r.url()).pathname);
  expect(paths.filter((p) => /\/(similar|explore|collection)$/.test(p))).toEqual([]);
  expect(asked.filter((r) => r.method() === 'POST' && r.url().includes('/search'))).toEqual([]);

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 90_000);

test('an expired link says so instead of opening; one that expires while open says so too', async () => {
  const past = await mintLocally({ q: 'colour:red', exp: Math.floor(Date.now() / 1000) - 60 });
  const r = await t.call('GET', `${ds.base}/search?limit=1`, { token: past });
  expect([r.status, r.body.error.code]).toEqual([401, 'token_expired']);

  const gone = await open(linkFor(past));
  await gone.page.getByText('This link has expired').waitFor();
  expect(await grid(gone.page).count()).toBe(0);
  expect(await gone.page.locator('section.admin').count()).toBe(0);
  expect(notHttp(gone.errors, 401)).toEqual([]);
  expect(gone.outside).toEqual([]);
  await gone.page.close();

  // Valid for a few seconds: the catalogue opens, then the notice turns into the expiry message,
  // and the next request's 401 token_expired is explained the same way.
  const soon = await mintLocally({ q: 'colour:red', exp: Math.floor(Date.now() / 1000) + 6 });
  const { page, errors, outside } = await open(linkFor(soon));
  await grid(page).first().waitFor();
  await page.locator('[data-testid="scope-notice"]').waitFor();
  await page.locator('[data-testid="scope-expired"]').waitFor({ timeout: 15_000 });
  await expect(page.locator('[data-testid="scope-expired"]').innerText()).resolves.toContain(
    'This link has expired',
  );
  await page.fill('#q-input', 'price:5:20');
  await page.getByRole('button', { name: 'Apply' }).click();
  const banner = page.locator('.error-banner[data-code="token_expired"]');
  await banner.waitFor();
  await expect(banner.innerText()).resolves.toContain('This link has expired');
  expect(notHttp(errors, 401)).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);

test('a link signed with another key, or opened on another dataset, is refused before any page', async () => {
  const forged = sign(`sk_${'A'.repeat(43)}`, { q: 'colour:red' });
  const genuine = await mintLocally({ q: 'colour:red' });
  for (const path of [
    linkFor(forged),
    `/#${new URLSearchParams({ token: genuine, org: 'scopedorg', dataset: 'other' }).toString()}`,
  ]) {
    const { page, errors, outside } = await open(path);
    await page.getByText('This link is not accepted').waitFor();
    expect(await page.locator('#token').count()).toBe(1); // the sign-in form, nothing else
    expect(await grid(page).count()).toBe(0);
    expect(notHttp(errors, 401, 404)).toEqual([]);
    expect(outside).toEqual([]);
    await page.close();
  }
}, 60_000);

test('a link past its rate says when to try again', async () => {
  const token = await mintLocally({ rate: 1, exp: Math.floor(Date.now() / 1000) + 600 });
  const { page, errors, outside } = await open(linkFor(token));
  const banner = page.locator('.error-banner[data-code="rate_limited"]');
  await banner.waitFor();
  const text = await banner.innerText();
  expect(text).toContain('Too many requests');
  expect(text).toMatch(/Try again in \d+ seconds?/);
  const wait = Number(await banner.getAttribute('data-retry-after'));
  expect(wait).toBeGreaterThan(0);
  expect(wait).toBeLessThanOrEqual(60);
  expect(notHttp(errors, 429)).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);

test('a bad scope is refused with the API error naming the field; a bad filter is marked where it is wrong', async () => {
  const { page, errors, outside } = await open(`/#token=${ds.orgToken}`);
  const form = page.locator('section.admin[data-dataset="shop"] form.scoped-share');
  await form.waitFor();
  const banner = form.locator('.error-banner[data-code="invalid_request"]');

  // A malformed filter: the 400's position, marked in the filter field as in the catalogue's bar.
  const q = 'colour:red,price:cheap:50';
  const mint = await t.call('POST', `${ds.base}/scoped-tokens`, {
    token: ds.orgToken,
    body: { q },
  });
  expect(mint.status).toBe(400);
  const position = (mint.body.error.details as Array<{ position?: number }>).find(
    (d) => typeof d.position === 'number',
  )?.position;
  expect(position).toBeDefined();
  await form.locator('#scoped-q-input').fill(q);
  await form.getByRole('button', { name: 'Make link' }).click();
  await banner.waitFor();
  await expect(banner.innerText()).resolves.toContain(mint.body.error.message);
  expect(await form.locator('.q-mark').getAttribute('data-position')).toBe(String(position));
  expect(await form.locator('#scoped-link').count()).toBe(0);

  // A field name longer than metadata keys may be: the details name `fields`.
  await form.locator('#scoped-q-input').fill('colour:red');
  await form.locator('#scoped-fields').fill('x'.repeat(300));
  await form.getByRole('button', { name: 'Make link' }).click();
  await form.locator('.error-details', { hasText: 'fields' }).waitFor();
  expect(await form.locator('.q-mark').count()).toBe(0);
  expect(await form.locator('#scoped-link').count()).toBe(0);

  // Put right, it makes the link.
  await form.locator('#scoped-fields').fill('');
  await form.getByRole('button', { name: 'Make link' }).click();
  await form.locator('#scoped-link').waitFor();
  expect(await banner.count()).toBe(0);

  expect(notHttp(errors, 400)).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);
