/**
 * GET /graphql in a real (headless) Chromium: the bundled GraphiQL page loads with no request
 * leaving this server, runs a query with a token header, and shows the result.
 */
import { type Browser } from 'playwright-core';
import { launchChromium } from './console-page';
import { setupDataset, startTestApp, type TestApp } from '../helpers/app';

let t: TestApp;
let browser: Browser;

beforeAll(async () => {
  t = await startTestApp({ APP_ROLES: 'api' });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await t?.stop();
});

test('the playground loads offline, sends the token header and shows the answer', async () => {
  const { orgToken } = await setupDataset(t, 'browserorg', 'things');
  const page = await browser.newPage();
  const origin = new URL(t.url).origin;
  const requested: string[] = [];
  const consoleErrors: string[] = [];
  page.on('request', (r) => requested.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  // Anything not served by us would fail here, as it would on a machine with no internet.
  await page.route(
    (url) => url.origin !== origin && url.protocol !== 'data:',
    (route) => route.abort(),
  );

  const res = await page.goto(`${t.url}/graphql`);
  expect(res?.status()).toBe(200);
  expect(res?.headers()['content-security-policy']).toContain("default-src 'self'");
  await page.waitForSelector('.graphiql-container', { timeout: 20_000 });

  // Replace the Headers editor's text as a user would (insertText: no auto-closed brackets).
  await page
    .getByRole('button', { name: /headers/i })
    .first()
    .click();
  await page.locator('.graphiql-editor-tool .CodeMirror:visible').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Backspace');
  await page.keyboard.insertText(JSON.stringify({ Authorization: `token ${orgToken}` }));
  await page.click('.graphiql-execute-button');

  const response = page.locator('.graphiql-response');
  await response.getByText('"ORGANISATION"', { exact: true }).waitFor({ timeout: 20_000 });
  const text = await response.innerText();
  expect(text).toContain('"organisation": "browserorg"');
  expect(text).not.toContain('unauthorized');

  expect(requested.length).toBeGreaterThan(0);
  expect(requested.filter((u) => !u.startsWith(origin) && !u.startsWith('data:'))).toEqual([]);
  expect(consoleErrors.filter((e) => /Content Security Policy|Failed to load/i.test(e))).toEqual(
    [],
  );
  await page.close();
}, 60_000);
