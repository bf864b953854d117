/**
 * Chromium for the console's browser suites: launched headless from CHROMIUM_PATH (the browser
 * project's globalSetup finds or installs it), and pages that record console errors and stop any
 * request to an origin the suite did not allow.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

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

/**
 * A new page at `url`, watched; `allowed` are the origins it may talk to; `before` can add
 * listeners before the page loads.
 */
export async function openWatched(
  browser: Browser,
  url: string,
  allowed: string[],
  width = 1280,
  before?: (page: Page) => void,
): Promise<Watched> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  before?.(page);
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

/** A server with one dataset of processed items, its image server and a browser. */
export interface ConsoleRig {
  t: TestApp;
  img: ImageServer;
  ds: Awaited<ReturnType<typeof setupDataset>>;
  browser: Browser;
}

/**
 * The set-up the console suites share: `content` (given the image server's url) pushed to
 * `org`/`name` and processed, then Chromium launched. What started is closed if a step fails.
 * `env`: more configuration for the service.
 */
export async function startConsoleRig(
  org: string,
  name: string,
  content: (imgUrl: string) => Array<{ id: string; url: string; metadata: object }>,
  env: Record<string, string> = {},
): Promise<ConsoleRig> {
  const rig: Partial<ConsoleRig> = {};
  try {
    rig.img = await startImageServer();
    rig.t = await startTestApp({ WORKER_CONCURRENCY: '8', ...env });
    rig.ds = await setupDataset(rig.t, org, name);
    const items = content(rig.img.url);
    const w = await rig.t.call('POST', `${rig.ds.base}/content`, {
      token: rig.ds.orgToken,
      body: { content: items },
    });
    if (w.status !== 202) throw new Error(`content answered ${w.status}`);
    await waitProcessed(rig.t, rig.ds.base, rig.ds.orgToken, items.length, 90_000);
    rig.browser = await launchChromium();
    return rig as ConsoleRig;
  } catch (e) {
    await stopConsoleRig(rig);
    throw e;
  }
}

export async function stopConsoleRig(rig: Partial<ConsoleRig> | undefined): Promise<void> {
  await rig?.browser?.close();
  await rig?.t?.stop();
  await rig?.img?.close();
}
