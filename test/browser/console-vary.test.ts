/**
 * The console's "Vary the results" switch (issue 37, contract §15) in headless Chromium, on a
 * catalogue of near-duplicates (40 pictures 5 times each, and 10 pictures once): an item's
 * similar items are asked with `diversity=0.5` while it is on, asked again when it is switched,
 * and show what the REST API gives for the same request: other pictures than the plain answer,
 * which repeats one picture. The switch is kept in the address (`similar=varied`) and survives
 * a reload; search by photo follows it too.
 */
import type { Browser, Page, Request } from 'playwright-core';
import type { TestApp } from '../helpers/app';
import { makeImage, type ImageServer } from '../helpers/image-server';
import { openWatched, startConsoleRig, stopConsoleRig, type ConsoleRig } from './console-page';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;

const COPIES = 5;
const pad = (n: number) => String(n).padStart(2, '0');
interface Doc {
  id: string;
  seed: number;
  picture: string;
  name: string;
}
const docs: Doc[] = [];
for (let seed = 0; seed < 50; seed++)
  for (let c = 0; c < (seed < 40 ? COPIES : 1); c++)
    docs.push({
      id: `p${pad(seed)}-c${c}`,
      seed,
      picture: `p${pad(seed)}`,
      name: `Picture ${seed} copy ${c}`,
    });
const pictureOf = new Map(docs.map((d) => [d.id, d.picture]));
const pictures = (ids: string[]) => new Set(ids.map((id) => pictureOf.get(id))).size;

const LIMIT = 13; // the detail panel asks for the item and 12 similar items
const VARIED = '0.5';

let t: TestApp;
let img: ImageServer;
let browser: Browser;
let ds: ConsoleRig['ds'];
let rig: ConsoleRig | undefined;

beforeAll(async () => {
  // The image server ignores the query string: copies are the same picture at another address.
  rig = await startConsoleRig('gallery', 'pictures', (imgUrl) =>
    docs.map(({ id, seed, picture, name }) => ({
      id,
      url: `${imgUrl}/img/${seed}.png?copy=${id}`,
      metadata: { picture, name },
    })),
  );
  ({ t, img, ds, browser } = rig);
}, 150_000);

afterAll(() => stopConsoleRig(rig), 60_000);

const open = (path: string) => openWatched(browser, t.url + path, [t.url, img.url]);

/** The REST `similar` answer's ids for `id` (itself first), with diversity or without. */
async function restSimilar(id: string, diversity?: string): Promise<string[]> {
  const d = diversity ? `&diversity=${diversity}` : '';
  const r = await t.call('GET', `${ds.base}/similar?id=${id}&limit=${LIMIT}${d}`, {
    token: ds.dsToken,
  });
  expect(r.status).toBe(200);
  return (r.body.results as Array<{ id: string }>).map((x) => x.id);
}

const isSimilar = (r: Request) => new URL(r.url()).pathname === `${ds.base}/similar`;
const diversityOf = (r: Request) => new URL(r.url()).searchParams.get('diversity');
const varySwitch = (page: Page) => page.getByRole('switch', { name: 'Vary the results' });
const similarTiles = 'ul[aria-label^="Items similar to"] .tile';

/** Waits for `sel`'s tiles to be exactly `ids`; if they never are, fails saying what showed. */
const waitTiles = (page: Page, sel: string, ids: string[]) =>
  page
    .waitForFunction(
      ([sel, want]) =>
        [...document.querySelectorAll(sel)].map((x: any) => x.getAttribute('data-id')).join() ===
        want,
      [sel, ids.join()] as const,
    )
    .catch(async (e: Error) => {
      const shown = await page
        .locator(sel)
        .evaluateAll((ts) => ts.map((x) => x.getAttribute('data-id')));
      throw new Error(`the tiles never became ${ids}; shown: ${shown} (${e.message})`);
    });
const waitSimilar = (page: Page, ids: string[]) => waitTiles(page, similarTiles, ids);

/** Opens the one tile of the catalogue filtered to `picture`; returns its similar request. */
async function openOnly(page: Page, picture: string): Promise<Request> {
  const tile = page.locator('ul[aria-label="Catalogue"] .tile');
  await page.waitForFunction((p) => {
    const tiles = document.querySelectorAll('ul[aria-label="Catalogue"] .tile');
    return tiles.length === 1 && tiles[0].getAttribute('data-id').startsWith(p);
  }, picture);
  const [request] = await Promise.all([page.waitForRequest(isSimilar), tile.click()]);
  return request;
}

test('"Vary the results" asks for similar items with diversity, shows other pictures, and survives a reload', async () => {
  // A picture of its own, whose plain similar items are its neighbours' copies in a row: what the
  // switch must change (else this test could not fail). Varied, the same request gives more
  // pictures.
  const id = 'p42-c0';
  const plain = (await restSimilar(id)).slice(1);
  const varied = (await restSimilar(id, VARIED)).slice(1);
  expect(pictures(plain)).toBeLessThan(plain.length);
  expect(pictures(varied)).toBeGreaterThan(pictures(plain));
  expect(varied).toHaveLength(plain.length);
  const picture = pictureOf.get(id)!;

  const { page, errors, outside } = await open(
    `/?dataset=pictures&q=picture:${picture}#token=${ds.dsToken}`,
  );
  // Off: no diversity, the plain answer.
  const first = await openOnly(page, picture);
  expect(diversityOf(first)).toBeNull();
  expect(await varySwitch(page).isChecked()).toBe(false);
  await waitSimilar(page, plain);

  // On: asked again with diversity, REST's varied answer, more pictures; the address says so.
  const [again] = await Promise.all([page.waitForRequest(isSimilar), varySwitch(page).check()]);
  expect(diversityOf(again)).toBe(VARIED);
  await waitSimilar(page, varied);
  expect(new URL(page.url()).searchParams.get('similar')).toBe('varied');

  // A reload keeps it: the panel, opened again, asks with diversity.
  await page.reload();
  const reopened = await openOnly(page, picture);
  expect(diversityOf(reopened)).toBe(VARIED);
  expect(await varySwitch(page).isChecked()).toBe(true);
  await waitSimilar(page, varied);

  // Off again: the plain answer, and the address forgets it.
  const [off] = await Promise.all([page.waitForRequest(isSimilar), varySwitch(page).uncheck()]);
  expect(diversityOf(off)).toBeNull();
  await waitSimilar(page, plain);
  expect(new URL(page.url()).searchParams.get('similar')).toBeNull();

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);

test('search by photo follows the switch, from a link that has it on', async () => {
  const { page, errors, outside } = await open(
    `/?dataset=pictures&similar=varied#token=${ds.dsToken}`,
  );
  const isLens = (r: Request) =>
    r.method() === 'POST' && new URL(r.url()).pathname === `${ds.base}/search`;
  const lensTiles = 'ul[aria-label="Items similar to the photo"] .tile';
  /** The ids a lens request's answer gives, once the page shows them. */
  const shown = async (request: Request) => {
    const body = (await (await request.response())!.json()) as { results: Array<{ id: string }> };
    const ids = body.results.map((r) => r.id);
    await waitTiles(page, lensTiles, ids);
    return ids;
  };
  await page.locator('ul[aria-label="Catalogue"] .tile').first().waitFor();
  const [on] = await Promise.all([
    page.waitForRequest(isLens),
    page.locator('[data-testid="lens-input"]').setInputFiles({
      name: 'photo.png',
      mimeType: 'image/png',
      buffer: await makeImage(42),
    }),
  ]);
  expect(diversityOf(on)).toBe(VARIED);
  expect(await varySwitch(page).isChecked()).toBe(true);
  const varied = await shown(on);

  // Off: the same photo asked again, plainly: the near-copies come back.
  const [off] = await Promise.all([page.waitForRequest(isLens), varySwitch(page).uncheck()]);
  expect(diversityOf(off)).toBeNull();
  const plain = await shown(off);
  expect(new URL(page.url()).searchParams.get('similar')).toBeNull();
  expect(pictures(varied)).toBeGreaterThan(pictures(plain));

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);
