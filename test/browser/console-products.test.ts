/**
 * The console's catalogue as a shopper's page (issue 36) in headless Chromium: a dataset whose
 * variants share a `parent` shows one tile per product with its variant count, the total in
 * products and items, and facet numbers that count products (contract §13), checked against a
 * brute-force count over the items and against the REST API; the "Show all variants" switch and
 * the whole grouped view survive a reload; a product's count opens its variants; and the
 * "most popular" and "best-selling" sorts ask for service_popularity / service_purchases
 * (contract §14) and put the most clicked and most bought first. Search by photo shows products too.
 * The detail panel's similar items (and explore journey) are one per other product, its own
 * variants a link, unless every variant is shown; the tile title field (`name`, shared by
 * variants) is not a facet.
 */
import type { Browser, Page } from 'playwright-core';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';
import { launchChromium, openWatched } from './console-page';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;

const COLOURS = ['red', 'green', 'blue', 'black', 'white'];
const MATERIALS = ['oak', 'steel', 'cane'];
const pad = (n: number) => String(n).padStart(2, '0');

interface Doc {
  id: string;
  parent?: string;
  colour: string;
  material: string;
  price: number;
  name: string;
}

// 60 products of 1 to 5 variants, two variants in a row sharing a colour (so a colour's item
// count and product count differ), then 30 items of no product: 210 items, 90 tiles. Sorted by
// price, products and single items alternate.
const docs: Doc[] = [];
for (let i = 0; i < 60; i++)
  for (let j = 0; j <= i % 5; j++)
    docs.push({
      id: `P${pad(i)}-v${j}`,
      parent: `P${pad(i)}`,
      colour: COLOURS[(i + (j >> 1)) % COLOURS.length],
      material: MATERIALS[i % MATERIALS.length],
      price: 20 + 2 * i,
      name: `Chair ${i}`,
    });
for (let k = 0; k < 30; k++)
  docs.push({
    id: `S${pad(k)}`,
    colour: COLOURS[k % COLOURS.length],
    material: MATERIALS[k % MATERIALS.length],
    price: 21 + 2 * k,
    name: `Lamp ${k}`,
  });
const byId = new Map(docs.map((d) => [d.id, d]));
const variantsOf = (parent: string) => docs.filter((d) => d.parent === parent).length;
const GROUPS = new Set(docs.map((d) => d.parent ?? d.id)).size;

type Field = 'colour' | 'material';
/**
 * Brute force: per value of `field`, the items (or the products, an item of no product being one
 * of its own) that have it and pass `keep`.
 */
function counts(field: Field, keep: (d: Doc) => boolean, grouped: boolean) {
  const seen = new Map<string, Set<string>>();
  for (const d of docs.filter(keep)) {
    const v = d[field];
    if (!seen.has(v)) seen.set(v, new Set());
    seen.get(v)!.add(grouped ? (d.parent ?? d.id) : d.id);
  }
  return Object.fromEntries([...seen].map(([v, s]) => [v, s.size]));
}
const all = () => true;

let t: TestApp;
let img: ImageServer;
let browser: Browser;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'furniture', 'chairs');
  const content = docs.map(({ id, ...metadata }, i) => ({
    id,
    url: `${img.url}/img/${i}.png`,
    metadata,
  }));
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, content.length, 90_000);
  browser = await launchChromium();
}, 150_000);

afterAll(async () => {
  await browser?.close();
  await t?.stop();
  await img?.close();
}, 60_000);

const open = (path: string) => openWatched(browser, t.url + path, [t.url, img.url]);
const rest = (qs: string) => t.call('GET', `${ds.base}/search?${qs}`, { token: ds.dsToken });

const cells = (page: Page) => page.locator('ul[aria-label="Catalogue"] > li');
const firstTile = (page: Page) => page.locator('ul[aria-label="Catalogue"] .tile').first();
/** Waits for the results head to count `n`; if it never does, fails saying what it showed. */
const waitTotal = (page: Page, n: number) =>
  page
    .waitForFunction(
      (x) => document.querySelector('.results-head .total')?.textContent === x,
      String(n),
    )
    .catch(async (e: Error) => {
      const shown = await page
        .locator('#results-title')
        .innerText()
        .catch(() => '?');
      throw new Error(`the total never became ${n}; the head says "${shown}" (${e.message})`);
    });
const waitFirst = (page: Page, id: string) =>
  page.waitForFunction(
    (x) =>
      document.querySelector('ul[aria-label="Catalogue"] .tile')?.getAttribute('data-id') === x,
    id,
  );
const heading = (page: Page) => page.locator('#results-title').innerText();
const variantsSwitch = (page: Page) => page.getByRole('switch', { name: 'Show all variants' });
const facetBox = (page: Page, field: string, value: string) =>
  page.locator(`fieldset[data-field="${field}"] .facet-row`, { hasText: value }).locator('input');

/** The numbers beside a field's boxes, by value. */
const facetNumbers = (page: Page, field: string): Promise<Record<string, number>> =>
  page
    .locator(`fieldset[data-field="${field}"] .facet-row`)
    .evaluateAll((rows) =>
      Object.fromEntries(
        rows.map((r) => [
          r.querySelector('.facet-value').textContent,
          Number(r.querySelector('.count').getAttribute('data-count')),
        ]),
      ),
    );

/** The REST API's facet counts for the same request (contract §13: groups under group). */
async function restFacets(qs: string, field: Field): Promise<Record<string, number>> {
  const r = await rest(`${qs}&facets=${field}&disjunctive=${field}&limit=2`);
  expect(r.status).toBe(200);
  return Object.fromEntries(
    (r.body.facets[field].buckets as Array<{ value: string; count: number }>).map((b) => [
      b.value,
      b.count,
    ]),
  );
}

/** Every tile of the page: its id, and the variant count over it (null: none shown). */
const tiles = (page: Page) =>
  cells(page).evaluateAll((lis) =>
    lis.map((li) => ({
      id: li.querySelector('.tile').getAttribute('data-id') as string,
      variants: (li.querySelector('.tile-variants')?.textContent ?? null) as string | null,
    })),
  );

test('one tile per product with its variant count; facets count products; the switch shows every variant', async () => {
  // The data must tell products from items, or this test could not see the difference.
  expect(counts('colour', all, true)).not.toEqual(counts('colour', all, false));

  const { page, errors, outside } = await open(
    `/?dataset=chairs&sort=price&order=asc#token=${ds.dsToken}`,
  );
  await waitTotal(page, GROUPS);
  expect(await heading(page)).toBe(`${GROUPS} products (${docs.length} items)`);
  expect(await variantsSwitch(page).isChecked()).toBe(false);

  // Page 1 by price: products 0–11 and single items 0–11, alternating, each once.
  const shown = await tiles(page);
  expect(shown).toHaveLength(24);
  const parents = shown.map((s) => byId.get(s.id)!.parent ?? s.id);
  expect(parents).toEqual(
    Array.from({ length: 12 }, (_, i) => [`P${pad(i)}`, `S${pad(i)}`]).flat(),
  );
  for (const s of shown) {
    const parent = byId.get(s.id)!.parent;
    const n = parent ? variantsOf(parent) : 0;
    expect([s.id, s.variants]).toEqual([
      s.id,
      parent ? `${n} ${n === 1 ? 'variant' : 'variants'}` : null,
    ]);
  }

  // The number beside a box is the number of tiles it leaves: products, as REST counts them.
  const colourGroups = counts('colour', all, true);
  expect(await facetNumbers(page, 'colour')).toEqual(colourGroups);
  expect(await restFacets('group=parent', 'colour')).toEqual(colourGroups);
  expect(await facetNumbers(page, 'material')).toEqual(counts('material', all, true));

  // Every variant: items, in the count, the facets and the tiles (none carries a count).
  await variantsSwitch(page).check();
  await waitTotal(page, docs.length);
  expect(await heading(page)).toBe(`${docs.length} items`);
  expect(new URL(page.url()).searchParams.get('variants')).toBe('all');
  expect(await facetNumbers(page, 'colour')).toEqual(counts('colour', all, false));
  expect((await tiles(page)).filter((s) => s.variants !== null)).toEqual([]);
  // Variants of one price are all there now, so the second tile is P00's (its only variant)
  // and then P01's two.
  expect((await tiles(page)).slice(0, 4).map((s) => byId.get(s.id)!.parent ?? s.id)).toEqual([
    'P00',
    'S00',
    'P01',
    'P01',
  ]);

  // The choice is part of the view: a reload keeps it, switching back goes back to products.
  await page.reload();
  await waitTotal(page, docs.length);
  expect(await variantsSwitch(page).isChecked()).toBe(true);
  await variantsSwitch(page).uncheck();
  await waitTotal(page, GROUPS);
  expect(new URL(page.url()).searchParams.has('variants')).toBe(false);
  expect(outside).toEqual([]);
  expect(errors).toEqual([]);
  await page.close();
}, 90_000);

test('grouped, a filter narrows products and counts them; page and filter survive a reload; a count opens the variants', async () => {
  const { page, errors } = await open(`/?dataset=chairs&sort=price&order=asc#token=${ds.dsToken}`);
  await waitTotal(page, GROUPS);
  const red = (d: Doc) => d.colour === 'red';
  const redProducts = new Set(docs.filter(red).map((d) => d.parent ?? d.id));
  const redItems = docs.filter(red);

  await facetBox(page, 'colour', 'red').check();
  await waitTotal(page, redProducts.size);
  expect(await heading(page)).toBe(`${redProducts.size} products (${redItems.length} items)`);
  // Material counts red products; colour keeps its alternatives' counts (disjunctive).
  const material = counts('material', red, true);
  expect(await facetNumbers(page, 'material')).toEqual(material);
  expect(await restFacets('group=parent&q=colour:red', 'material')).toEqual(material);
  expect(await facetNumbers(page, 'colour')).toEqual(counts('colour', all, true));

  // Paging counts products: page 2 of ⌈products / 24⌉, kept over a reload.
  const pages = Math.ceil(redProducts.size / 24);
  const page1 = await tiles(page);
  await page.getByRole('button', { name: 'Next →' }).click();
  await page.waitForFunction(
    (x) => document.querySelector('.pager span')?.textContent === x,
    `Page 2 of ${pages}`,
  );
  // The pager may say page 2 before the grid shows it: wait for page 1's first tile to go.
  await page.waitForFunction(
    (first) =>
      document.querySelector('ul[aria-label="Catalogue"] > li .tile')?.getAttribute('data-id') !==
      first,
    page1[0]!.id,
  );
  const page2 = await tiles(page);
  expect(page2.map((s) => s.id)).not.toContain(page1[0]!.id);
  expect(new URL(page.url()).searchParams.get('page')).toBe('2');
  await page.reload();
  await page.waitForFunction(
    (x) => document.querySelector('.pager span')?.textContent === x,
    `Page 2 of ${pages}`,
  );
  await waitTotal(page, redProducts.size);
  expect(await tiles(page)).toEqual(page2);
  expect(await facetBox(page, 'colour', 'red').isChecked()).toBe(true);
  expect(await variantsSwitch(page).isChecked()).toBe(false);

  // A count counts the product's red variants; a click on it shows those variants.
  const withCount = page2.find((s) => s.variants !== null && !s.variants.startsWith('1 '))!;
  expect(withCount).toBeDefined();
  const parent = byId.get(withCount.id)!.parent!;
  const theirs = redItems.filter((d) => d.parent === parent);
  expect(withCount.variants).toBe(`${theirs.length} variants`);
  await cells(page)
    .filter({ has: page.locator(`[data-id="${withCount.id}"]`) })
    .locator('.tile-variants')
    .click();
  await waitTotal(page, theirs.length);
  expect(await page.locator('#q-input').inputValue()).toBe(`colour:red,parent:${parent}`);
  expect(await variantsSwitch(page).isChecked()).toBe(true);
  expect((await tiles(page)).map((s) => s.id).sort()).toEqual(theirs.map((d) => d.id).sort());

  // Back to every product, the colour filter kept.
  await page.getByRole('button', { name: '← All products' }).click();
  await waitTotal(page, redProducts.size);
  expect(await page.locator('#q-input').inputValue()).toBe('colour:red');
  expect(await variantsSwitch(page).isChecked()).toBe(false);
  expect(errors).toEqual([]);
  await page.close();
}, 90_000);

test('"most popular" and "best-selling" sort by service_popularity and service_purchases, descending', async () => {
  // Clicks and purchases through the Analytics API; the roll-up shows them within 60 s (§14).
  const events = [
    ...Array.from({ length: 5 }, () => ({ v: 'a:click,id:P04-v2' })),
    ...Array.from({ length: 3 }, () => ({ v: 'a:click,id:S03' })),
    { v: 'a:click,id:P10-v0' },
    { v: 'a:purchase,id:S07,qty:4' },
    { v: 'a:purchase,id:P02-v1,qty:2' },
  ];
  const tracked = await t.call('POST', `${ds.base}/track`, { token: ds.dsToken, body: { events } });
  expect(tracked.status).toBe(202);
  const top = async (sort: string) =>
    (await rest(`sort=${sort}&order=desc&limit=2&fields=${sort}`)).body.results?.[0];
  await waitFor(
    'the counts to be rolled up',
    async () =>
      (await top('service_popularity'))?.metadata.service_popularity === 5 &&
      (await top('service_purchases'))?.metadata.service_purchases === 4,
    60_000,
  );

  const { page, errors } = await open(`/?dataset=chairs&order=asc#token=${ds.dsToken}`);
  await waitTotal(page, GROUPS);
  const options = await page
    .locator('#sort option')
    .evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
  expect(options).toEqual(
    expect.arrayContaining([
      ['service_popularity', 'most popular'],
      ['service_purchases', 'best-selling'],
    ]),
  );
  // Sorts, not filters: the counts have no box or range in the sidebar, nor has parent.
  expect(
    await page.locator('fieldset[data-field^="service_"], fieldset[data-field="parent"]').count(),
  ).toBe(0);

  /** Chooses a sort and returns the search request it made and that request's status. */
  const choose = async (sort: string) => {
    const [request] = await Promise.all([
      page.waitForRequest(
        (r) =>
          new URL(r.url()).pathname.endsWith('/search') &&
          new URL(r.url()).searchParams.get('sort') === sort,
      ),
      page.selectOption('#sort', sort),
    ]);
    const params = Object.fromEntries(new URL(request.url()).searchParams);
    return { params, status: (await request.response())?.status() };
  };

  // Chosen while the order is ascending, "most popular" means the most clicked first.
  const popular = await choose('service_popularity');
  expect([popular.status, popular.params.order, popular.params.group]).toEqual([
    200,
    'desc',
    'parent',
  ]);
  await waitFirst(page, 'P04-v2');
  expect(await page.locator('#order').inputValue()).toBe('desc');
  expect((await tiles(page)).slice(0, 3).map((s) => s.id)).toEqual(['P04-v2', 'S03', 'P10-v0']);
  expect(await firstTile(page).locator('.tile-line').innerText()).toBe('clicks, 30 days: 5');

  const selling = await choose('service_purchases');
  expect([selling.status, selling.params.order, selling.params.group]).toEqual([
    200,
    'desc',
    'parent',
  ]);
  await waitFirst(page, 'S07');
  expect((await tiles(page)).slice(0, 2).map((s) => s.id)).toEqual(['S07', 'P02-v1']);
  expect(await firstTile(page).locator('.tile-line').innerText()).toBe('sold, 30 days: 4');
  // Kept in the address like any sort (descending is the default order, so not written).
  expect(Object.fromEntries(new URL(page.url()).searchParams)).toEqual({
    dataset: 'chairs',
    sort: 'service_purchases',
  });
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('a product count the service estimated (more than 10,000 groups) says "about"', async () => {
  const { page, errors } = await open('/');
  // This catalogue is small enough to be counted exactly: the answer is marked as an estimate.
  await page.route(
    (u) => u.pathname === `${ds.base}/search`,
    async (route) => {
      const res = await route.fetch();
      const body = await res.json();
      await route.fulfill({ response: res, json: { ...body, total_groups_exact: false } });
    },
  );
  await page.goto(`${t.url}/?dataset=chairs#token=${ds.dsToken}`);
  await waitTotal(page, GROUPS);
  expect(await heading(page)).toBe(`about ${GROUPS} products (${docs.length} items)`);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('search by photo shows one tile per product; its count opens the variants', async () => {
  const { page, errors } = await open(`/?dataset=chairs#token=${ds.dsToken}`);
  await waitTotal(page, GROUPS);
  // P04-v2's own picture: it comes first, standing for its product of 5.
  await page.locator('[data-testid="lens-input"]').setInputFiles({
    name: 'photo.png',
    mimeType: 'image/png',
    buffer: await makeImage(docs.findIndex((d) => d.id === 'P04-v2')),
  });
  const results = page.locator('ul[aria-label="Items similar to the photo"] > li');
  await results.first().waitFor();
  const found = await results.evaluateAll((lis) =>
    lis.map((li) => ({
      id: li.querySelector('.tile').getAttribute('data-id') as string,
      variants: (li.querySelector('.tile-variants')?.textContent ?? null) as string | null,
    })),
  );
  expect(found[0]).toEqual({ id: 'P04-v2', variants: '5 variants' });
  const products = found.map((f) => byId.get(f.id)!.parent ?? f.id);
  expect(new Set(products).size).toBe(found.length);
  expect(await page.locator('.lens-query [role="status"]').innerText()).toBe(
    `${found.length} most similar products`,
  );

  await results.first().locator('.tile-variants').click();
  await waitTotal(page, variantsOf('P04'));
  expect(await page.locator('#q-input').inputValue()).toBe('parent:P04');
  expect(await variantsSwitch(page).isChecked()).toBe(true);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

/** The product an item stands for (an item of no product is one of its own). */
const productOf = (id: string) => byId.get(id)!.parent ?? id;
/** The REST `similar` answer's ids for `id` (itself first), grouped by parent or not. */
async function restSimilar(id: string, grouped: boolean): Promise<string[]> {
  const r = await t.call(
    'GET',
    `${ds.base}/similar?id=${encodeURIComponent(id)}&limit=13${grouped ? '&group=parent' : ''}`,
    { token: ds.dsToken },
  );
  expect(r.status).toBe(200);
  return (r.body.results as Array<{ id: string }>).map((x) => x.id);
}
/** Whether a list of ids shows `self`'s own product again, or some product twice. */
const repeatsProducts = (self: string, ids: string[]) =>
  ids.some((id) => productOf(id) === productOf(self)) ||
  new Set(ids.map(productOf)).size < ids.length;

test('on a grouped catalogue an item’s similar items are one per other product; its variants are a link', async () => {
  // A product whose tile's item has, ungrouped, a variant of its own product or two items of one
  // product among its similar items: what grouping must change (else this test could not fail).
  let chosen: { parent: string; id: string; ungrouped: string[] } | undefined;
  for (let i = 0; i < 60 && !chosen; i++) {
    const parent = `P${pad(i)}`;
    if (variantsOf(parent) < 2) continue;
    const tile = await rest(`group=parent&sort=price&order=asc&q=parent:${parent}&limit=2`);
    const id = tile.body.results[0].id as string;
    const ungrouped = (await restSimilar(id, false)).slice(1);
    if (repeatsProducts(id, ungrouped)) chosen = { parent, id, ungrouped };
  }
  if (!chosen) throw new Error('no item whose similar items repeat a product: change the data');
  const { parent, id } = chosen;
  const grouped = await restSimilar(id, true);
  expect(grouped[0]).toBe(id);

  const { page, errors } = await open(
    `/?dataset=chairs&sort=price&order=asc&q=parent:${parent}#token=${ds.dsToken}`,
  );
  await waitTotal(page, 1);
  const [similarRequest] = await Promise.all([
    page.waitForRequest((r) => new URL(r.url()).pathname.endsWith('/similar')),
    firstTile(page).click(),
  ]);
  expect(new URL(similarRequest.url()).searchParams.get('group')).toBe('parent');
  await expect(page.locator('.detail-id .mono').innerText()).resolves.toBe(id);
  const list = page.locator('ul[aria-label^="Items similar to"] .tile');
  await list.first().waitFor();
  const similar = await list.evaluateAll((ts) => ts.map((x) => x.getAttribute('data-id')));
  expect(await page.locator('#similar-title').innerText()).toBe('Similar products');
  expect(similar.length).toBeGreaterThan(1);
  // Never the item's own product, never two items of one product: REST's grouped answer.
  expect(similar.filter((s) => productOf(s!) === parent)).toEqual([]);
  expect(new Set(similar.map((s) => productOf(s!))).size).toBe(similar.length);
  expect(similar).toEqual(grouped.slice(1));

  // An explore journey from it goes on through products too.
  const [exploreRequest] = await Promise.all([
    page.waitForRequest((r) => new URL(r.url()).pathname.endsWith('/explore')),
    page.getByRole('button', { name: 'Explore from here' }).click(),
  ]);
  expect(new URL(exploreRequest.url()).searchParams.get('group')).toBe('parent');
  const step = page.locator('ul[aria-label="Next step of the journey"] .tile');
  await step.first().waitFor();
  const next = await step.evaluateAll((ts) => ts.map((x) => x.getAttribute('data-id')));
  expect(new Set(next.map((s) => productOf(s!))).size).toBe(next.length);

  // Its own variants: a link to them, all of them, each a tile.
  const others = variantsOf(parent) - 1;
  const link = page.locator('.detail-variants button');
  expect(await page.locator('.detail-variants').innerText()).toBe(
    `Other variants of this product: ${others}`,
  );
  await link.click();
  await waitTotal(page, variantsOf(parent));
  expect(await page.locator('#q-input').inputValue()).toBe(`parent:${parent}`);
  expect(await variantsSwitch(page).isChecked()).toBe(true);
  expect(await page.locator('.detail').count()).toBe(0);
  expect(errors).toEqual([]);
  await page.close();
}, 90_000);

test('with "Show all variants" similar items are asked ungrouped, and may be variants of it', async () => {
  const parent = 'P04';
  const tile = await rest(`group=parent&sort=price&order=asc&q=parent:${parent}&limit=2`);
  const id = tile.body.results[0].id as string;
  const { page, errors } = await open(
    `/?dataset=chairs&sort=price&order=asc&q=parent:${parent}&variants=all#token=${ds.dsToken}`,
  );
  await waitTotal(page, variantsOf(parent));
  const [similarRequest] = await Promise.all([
    page.waitForRequest((r) => new URL(r.url()).pathname.endsWith('/similar')),
    page.locator(`ul[aria-label="Catalogue"] .tile[data-id="${id}"]`).click(),
  ]);
  expect(new URL(similarRequest.url()).searchParams.has('group')).toBe(false);
  const list = page.locator('ul[aria-label^="Items similar to"] .tile');
  await list.first().waitFor();
  const similar = await list.evaluateAll((ts) => ts.map((x) => x.getAttribute('data-id')));
  expect(await page.locator('#similar-title').innerText()).toBe('Similar items');
  expect(similar).toEqual((await restSimilar(id, false)).slice(1));
  expect(await page.locator('.detail-variants').count()).toBe(0);
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);

test('the tile title field is no facet in the sidebar; with the id as title it is', async () => {
  // Variants share their name, so as a facet it would list names counted mostly once.
  const names = await rest('group=parent&facets=name&limit=2');
  expect(names.status).toBe(200);
  expect(names.body.facets.name.buckets.length).toBeGreaterThan(0);

  const { page, errors } = await open('/');
  const [request] = await Promise.all([
    page.waitForRequest(
      (r) => new URL(r.url()).pathname.endsWith('/search') && r.method() === 'GET',
    ),
    page.goto(`${t.url}/?dataset=chairs#token=${ds.dsToken}`),
  ]);
  await waitTotal(page, GROUPS);
  expect(await page.locator('#title-field').inputValue()).toBe('name');
  await page.locator('fieldset[data-field="colour"]').waitFor();
  expect(await page.locator('fieldset[data-field="material"]').count()).toBe(1);
  expect(await page.locator('fieldset[data-field="name"]').count()).toBe(0);
  expect(new URL(request.url()).searchParams.get('facets')?.split(',')).not.toContain('name');
  // Titled by id, the name is a field like any other again.
  await page.selectOption('#title-field', 'id');
  await page.locator('fieldset[data-field="name"]').waitFor();
  expect(errors).toEqual([]);
  await page.close();
}, 60_000);
