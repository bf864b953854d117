/**
 * Tuned similarity (contract §20) in the console, in headless Chromium against a real server
 * whose tuning pass runs every 200 ms: an organisation user names the labels field on the
 * dataset admin, sees the fit's state and both cross-validated figures exactly as the REST
 * dataset object gives them (a weight past 1 is refused by the form), and switches tuning off.
 */
import { waitFor, type TestApp } from '../helpers/app';
import { openWatched, startConsoleRig, stopConsoleRig, type ConsoleRig } from './console-page';

let t: TestApp;
let ds: ConsoleRig['ds'];
let rig: ConsoleRig | undefined;

beforeAll(async () => {
  rig = await startConsoleRig(
    'simorg',
    'shop',
    (imgUrl) =>
      Array.from({ length: 36 }, (_, i) => ({
        id: `p-${i}`,
        url: `${imgUrl}/img/${i}.png`,
        metadata: { kind: ['a', 'b', 'c'][i % 3] },
      })),
    { TUNING_PASS_MS: '200' },
  );
  ({ t, ds } = rig);
}, 150_000);

afterAll(() => stopConsoleRig(rig), 60_000);

const rest = async () =>
  (await t.call('GET', '/orgs/simorg/datasets/shop', { token: ds.orgToken })).body.dataset.settings
    .similarity;

test('learn from a field, see the fit and its figures, switch off', async () => {
  const { page, errors } = await openWatched(rig!.browser, `${t.url}/#token=${ds.orgToken}`, [
    t.url,
  ]);
  const panel = page.locator(
    'section.admin[data-dataset="shop"] [data-testid="similarity-settings"]',
  );
  await panel.waitFor();
  await expect(panel.locator('[role="status"]').getAttribute('data-state')).resolves.toBe('off');

  // a weight past 1 is refused by the form itself: nothing is sent
  await panel.getByLabel('Labels field').fill('kind');
  await panel.getByLabel('Weight').fill('1.5');
  await panel.getByRole('button', { name: 'Learn from this field' }).click();
  expect(await panel.getByLabel('Weight').evaluate((e: any) => e.checkValidity())).toBe(false);
  expect(await rest()).toBeUndefined();

  await panel.getByLabel('Weight').fill('0.75');
  await panel.getByRole('button', { name: 'Learn from this field' }).click();
  // the fit lands in the background; the panel polls until it has
  const done = await waitFor(
    'the fit',
    async () => {
      const s = await rest();
      return s && s.state !== 'fitting' && s;
    },
    60_000,
  );
  const status = panel.locator('[role="status"]');
  await page.waitForFunction(
    (state: string) =>
      (globalThis as any).document
        .querySelector('[data-testid="similarity-settings"] [role="status"]')
        ?.getAttribute('data-state') === state,
    done.state,
  );
  const text = await panel.innerText();
  expect(text).toContain(`on ${done.labelled_items} labelled items in ${done.classes} labels`);
  expect(text).toContain(
    `held-out precision@10 ${done.cv_precision_at_10.plain.toFixed(3)} plain, ${done.cv_precision_at_10.tuned.toFixed(3)} tuned`,
  );
  if (done.reason) await expect(status.innerText()).resolves.toContain(done.reason);

  await panel.getByRole('button', { name: 'Switch off' }).click();
  await page.waitForFunction(
    () =>
      (globalThis as any).document
        .querySelector('[data-testid="similarity-settings"] [role="status"]')
        ?.getAttribute('data-state') === 'off',
  );
  expect((await rest()).state).toBe('off');
  expect(errors).toEqual([]);
}, 120_000);
