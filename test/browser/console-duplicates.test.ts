/**
 * The console's near-duplicate report page (contract §18) in headless Chromium, against a real
 * server whose background pass runs every 200 ms: an organisation user opens it from the dataset
 * admin and sees exactly the groups the REST report gives, page by page — one picture under three
 * ids and urls as an exact group, each item a thumbnail of its original image with its distance —
 * with the kind filter and "exclude items sharing a parent" kept in the address. "Not duplicates"
 * on a group, and on one item of a group, dismisses them: the page and the REST report then keep
 * them apart. A dataset without groups says so; an unknown one shows the API's error.
 */
import type { Page } from 'playwright-core';
import { waitFor, type TestApp } from '../helpers/app';
import type { ImageServer } from '../helpers/image-server';
import { openWatched, startConsoleRig, stopConsoleRig, type ConsoleRig } from './console-page';

// The page functions below run in Chromium; this project's types are Node's.
declare const document: any;

interface Group {
  id: string;
  kind: 'exact' | 'near';
  items: Array<{ id: string; distance: number }>;
}
interface Report {
  computed_at: string | null;
  pending: boolean;
  groups: Group[];
  next_cursor: string | null;
}

/** One picture (image server seed 5) under three ids and urls: an exact group. */
const SAME = ['a-1', 'a-2', 'a-3'];
/** Another picture under three ids (seed 7), for dismissing one item of a group. */
const TRIO = ['b-1', 'b-2', 'b-3'];
/** Pairs of copies (seeds 11…), enough groups for a second page of 20; p-00's share a parent. */
const PAIRS = 20;
const pair = (k: number) => [
  `p-${String(k).padStart(2, '0')}-a`,
  `p-${String(k).padStart(2, '0')}-b`,
];

let t: TestApp;
let img: ImageServer;
let ds: ConsoleRig['ds'];
let rig: ConsoleRig | undefined;

beforeAll(async () => {
  rig = await startConsoleRig(
    'duporg',
    'shop',
    (imgUrl) => [
      ...SAME.map((id, i) => ({
        id,
        url: `${imgUrl}/img/5.png${i ? `?copy=${i + 1}` : ''}`,
        metadata: { name: `Copy ${i + 1}` },
      })),
      ...TRIO.map((id, i) => ({
        id,
        url: `${imgUrl}/img/7.png?trio=${i}`,
        metadata: { name: `Trio ${i}` },
      })),
      ...Array.from({ length: PAIRS }, (_, k) =>
        pair(k).map((id, i) => ({
          id,
          url: `${imgUrl}/img/${11 + k}.png?pair=${i}`,
          metadata: k === 0 ? { parent: 'sku-0' } : {},
        })),
      ).flat(),
    ],
    { DUPLICATE_REPORT: 'on', DUPLICATE_PASS_MS: '200' },
  );
  ({ t, img, ds } = rig);
  // A pass after the last item was processed.
  await waitFor(
    'a settled duplicate report',
    async () => {
      const r = await report();
      return !r.pending && r.computed_at !== null && r.groups.length > 0;
    },
    60_000,
  );
}, 150_000);

afterAll(() => stopConsoleRig(rig), 60_000);

const open = (path: string) => openWatched(rig!.browser, t.url + path, [t.url, img.url]);

/** The REST report (organisation token). */
async function report(query = '', name = 'shop'): Promise<Report> {
  const r = await t.call<Report>('GET', `/orgs/duporg/datasets/${name}/duplicates${query}`, {
    token: ds.orgToken,
  });
  expect(r.status).toBe(200);
  return r.body;
}

const sorted = (ids: string[]) => [...ids].sort();

/** The groups the page shows: kind and member ids (with distances) as in the REST body. */
const shownGroups = (page: Page): Promise<Group[]> =>
  page.locator('li.dup-group').evaluateAll((els) =>
    els.map((g) => ({
      id: g.getAttribute('data-group') as string,
      kind: g.getAttribute('data-kind') as 'exact' | 'near',
      items: [...g.querySelectorAll('li.dup-item')].map((i) => ({
        id: i.getAttribute('data-id') as string,
        distance: Number(i.getAttribute('data-distance')),
      })),
    })),
  );

/**
 * Waits until the page, done loading, lists these groups with these members (in order): a
 * group keeps its id when one of its items is dismissed, so the ids alone match the page
 * from before.
 */
async function shows(page: Page, groups: Group[]): Promise<void> {
  await page.waitForFunction(
    (want: string) =>
      document.querySelector('.duplicates section[aria-busy="false"]') &&
      JSON.stringify(
        [...document.querySelectorAll('li.dup-group')].map((g: any) => [
          g.getAttribute('data-group'),
          [...g.querySelectorAll('li.dup-item')].map((i: any) => i.getAttribute('data-id')),
        ]),
      ) === want,
    JSON.stringify(groups.map((g) => [g.id, g.items.map((i) => i.id)])),
  );
  expect(await shownGroups(page)).toEqual(groups);
}

const groupOf = (page: Page, id: string) =>
  page.locator('li.dup-group', { has: page.locator(`li.dup-item[data-id="${id}"]`) });

test('the report page shows the groups with thumbnails and distances, by page, kind and parent', async () => {
  const first = await report('?limit=20');
  expect(first.next_cursor).not.toBeNull();
  const second = await report(`?limit=20&cursor=${encodeURIComponent(first.next_cursor!)}`);
  const same = first.groups.find((g) => g.items.some((i) => i.id === 'a-1'))!;
  expect(same.kind).toBe('exact');
  expect(sorted(same.items.map((i) => i.id))).toEqual(SAME);

  const { page, errors, outside } = await open(`/#token=${ds.orgToken}`);
  // From the dataset admin, like the catalogue.
  const admin = page.locator('section.admin[data-dataset="shop"]');
  await admin.getByRole('button', { name: 'Duplicates' }).click();
  await page.locator('#duplicates-title').waitFor();
  expect(page.url()).toBe(`${t.url}/?duplicates=shop`);
  await shows(page, first.groups);
  await expect(page.locator('[data-testid="computed-at"]').innerText()).resolves.toContain(
    'Computed',
  );
  expect(await page.locator('[data-testid="computed-at"] time').getAttribute('datetime')).toBe(
    first.computed_at,
  );

  // The exact group: a badge, and each item as its original image with its distance.
  const group = groupOf(page, 'a-1');
  await expect(group.locator('.badge').innerText()).resolves.toBe('exact');
  const srcs = await group
    .locator('li.dup-item img')
    .evaluateAll((els) => els.map((e) => e.getAttribute('src')));
  expect(sorted(srcs as string[])).toEqual(
    sorted([`${img.url}/img/5.png`, `${img.url}/img/5.png?copy=2`, `${img.url}/img/5.png?copy=3`]),
  );
  await waitFor('the thumbnails to load', () =>
    group
      .locator('li.dup-item img')
      .evaluateAll((els) => els.every((i: any) => i.complete && i.naturalWidth > 0)),
  );
  for (const m of same.items)
    await expect(
      group.locator(`li.dup-item[data-id="${m.id}"] [data-label="distance"]`).innerText(),
    ).resolves.toContain(m.distance.toFixed(3));

  // The next page follows the report's cursor; Previous comes back.
  await page.getByRole('button', { name: 'Next →' }).click();
  await shows(page, second.groups);
  await expect(page.locator('.pager').innerText()).resolves.toContain('Page 2');
  await page.getByRole('button', { name: '← Previous' }).click();
  await shows(page, first.groups);

  // Near copies only: the report's own groups (exact copies then come at distance 0).
  await page.locator('#duplicates-kind').selectOption('near');
  await shows(page, (await report('?kind=near&limit=20')).groups);
  expect(page.url()).toBe(`${t.url}/?duplicates=shop&kind=near`);
  await page.locator('#duplicates-kind').selectOption('exact');
  const exact = (await report('?kind=exact&limit=20')).groups;
  await shows(page, exact);
  expect(exact.every((g) => g.kind === 'exact')).toBe(true);

  // Items sharing a parent are left out: p-00's pair is no group any more.
  const p00 = pair(0);
  expect(exact.some((g) => g.items.some((i) => i.id === p00[0]))).toBe(true);
  await page.getByLabel('Exclude items sharing a parent').check();
  const apart = (await report('?kind=exact&exclude_same_parent=true&limit=20')).groups;
  expect(apart.some((g) => g.items.some((i) => p00.includes(i.id)))).toBe(false);
  await shows(page, apart);
  expect(page.url()).toBe(`${t.url}/?duplicates=shop&kind=exact&exclude_same_parent=true`);

  // The choices are in the address: a reload keeps them, back undoes the last one.
  await page.reload();
  await shows(page, apart);
  expect(await page.getByLabel('Exclude items sharing a parent').isChecked()).toBe(true);
  await page.goBack();
  await shows(page, exact);
  expect(await page.getByLabel('Exclude items sharing a parent').isChecked()).toBe(false);
  expect(await page.locator('#duplicates-kind').inputValue()).toBe('exact');

  // Back to the datasets.
  await page.getByRole('button', { name: '← Datasets' }).click();
  await page.locator('section.admin[data-dataset="shop"]').waitFor();
  expect(page.url()).toBe(`${t.url}/`);

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 90_000);

test('"Not duplicates" dismisses a group, or one item of it; the report then keeps them apart', async () => {
  // A link to the page itself, signed in from its fragment.
  const { page, errors, outside } = await open(`/?duplicates=shop#token=${ds.orgToken}`);
  await shows(page, (await report('?limit=20')).groups);
  expect(page.url()).toBe(`${t.url}/?duplicates=shop`);

  // One item of the trio: dismissed against the group's first item.
  await groupOf(page, 'b-1').getByRole('button', { name: 'b-3 is not a duplicate of b-1' }).click();
  const together = (r: Report, ids: string[]) =>
    r.groups.some((g) => g.items.filter((i) => ids.includes(i.id)).length >= 2);
  const afterItem = await waitFor('the dismissal in the report', async () => {
    const r = await report('?limit=20');
    return !together(r, ['b-1', 'b-3']) && r;
  });
  await shows(page, afterItem.groups);

  // The whole exact group: gone from the page, and no report groups any two of them.
  await groupOf(page, 'a-1')
    .getByRole('button', { name: /^Not duplicates/ })
    .click();
  await groupOf(page, 'a-1').waitFor({ state: 'detached' });
  const afterGroup = await report('?limit=20');
  await shows(page, afterGroup.groups);
  for (const query of ['?limit=100', '?kind=near&limit=100', '?kind=exact&limit=100'])
    expect(together(await report(query), SAME)).toBe(false);

  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 90_000);

test('a dataset with no duplicates says so; an unknown dataset shows the error', async () => {
  const made = await t.call('POST', '/orgs/duporg/datasets', {
    token: ds.orgToken,
    body: { name: 'empty' },
  });
  expect(made.status).toBe(201);
  const { page, errors, outside } = await open(`/?duplicates=empty#token=${ds.orgToken}`);
  await page.locator('[data-testid="no-duplicates"]').waitFor();
  expect(await page.locator('li.dup-group').count()).toBe(0);
  expect((await report('', 'empty')).groups).toEqual([]);

  await page.goto(`${t.url}/?duplicates=nope`);
  const banner = page.locator('.duplicates .error-banner');
  await banner.waitFor();
  await expect(banner.getAttribute('data-code')).resolves.toBe('not_found');
  expect(await page.locator('[data-testid="no-duplicates"]').count()).toBe(0);

  // GraphQL answers the refusal with a 200 and its errors: nothing is logged.
  expect(errors).toEqual([]);
  expect(outside).toEqual([]);
  await page.close();
}, 60_000);
