/**
 * Chromium for the console's browser suites: launched headless from CHROMIUM_PATH (the browser
 * project's globalSetup finds or installs it), and pages that record console errors and stop any
 * request to an origin the suite did not allow.
 */
import { chromium, type Browser, type Page } from 'playwright-core';

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });

export interface Watched {
  page: Page;
  /** Console errors and uncaught exceptions. */
  errors: string[];
  /** Requests to anywhere but the allowed origins. */
  outside: string[];
}

/** A new page at `url`, watched; `allowed` are the origins it may talk to. */
export async function openWatched(
  browser: Browser,
  url: string,
  allowed: string[],
  width = 1280,
): Promise<Watched> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const errors: string[] = [];
  const outside: string[] = [];
  const origins = allowed.map((a) => new URL(a).origin);
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await page.route(
    (u) => !origins.includes(u.origin) && u.protocol !== 'data:',
    (route) => {
      outside.push(route.request().url());
      return route.abort();
    },
  );
  const res = await page.goto(url);
  if (res?.status() !== 200) throw new Error(`${url}: HTTP ${res?.status()}`);
  return { page, errors, outside };
}
