// Screenshots of the web console for the docs: starts the built service (dist/) on a temporary
// data directory with a small generated catalogue served by a local image server, drives
// Chromium through playwright-core, and writes docs/console-*.png at 1280 px and 375 px.
//
// Usage: npm run screenshots   (builds first; Chromium from scripts/chromium.sh or CHROMIUM_PATH)
/* global console, fetch, document -- Node's globals, and the page's in waitForFunction */
import { Buffer } from 'node:buffer';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const dist = process.env.SCREENSHOTS_DIST ?? path.join(root, 'dist');
if (!fs.existsSync(path.join(dist, 'app/start.js')) || !fs.existsSync(path.join(dist, 'web'))) {
  console.error(`[screenshots] no build in ${dist}: run npm run build first`);
  process.exit(1);
}
const { startApp } = require(path.join(dist, 'app/start.js'));
const { loadConfig } = require(path.join(dist, 'config/env.js'));
const sharp = require('sharp');
const pino = require('pino');
const { chromium } = require('playwright-core');

const out = path.join(root, 'docs');
const OPERATOR = 'screenshots-operator-token-0123456789';

// ---- a small catalogue of products in several colours: 4 kinds × 12 models, each model (a
// product, its `parent`) in 2 to 6 colours, the common colours in more products: 206 items
// (≥ 200, so the Vision API answers), drawn as simple SVG pictures. The console shows one tile
// per product, its variant count over it.
const COLOURS = {
  red: '#d93025',
  green: '#188038',
  blue: '#1a73e8',
  black: '#2b2d30',
  yellow: '#f2b400',
  pink: '#e3528f',
};
const KINDS = ['bag', 'shoe', 'hat', 'lamp'];
const MODELS = 'Alto Brio Cara Dune Echo Fjord Gala Halo Iris Jade Kite Luna'.split(' ');
const BRANDS = ['Acme', 'Northwind', 'Globex'];

function shape(kind, fill, v) {
  const dx = (v % 3) * 8 - 8;
  const s = 0.85 + (v % 4) * 0.06;
  const g = `transform="translate(${128 + dx} 136) scale(${s}) translate(-128 -136)"`;
  switch (kind) {
    case 'bag':
      return `<g ${g}><path d="M96 104 q32 -64 64 0" fill="none" stroke="${fill}" stroke-width="10"/>
        <rect x="64" y="100" width="128" height="104" rx="14" fill="${fill}"/>
        <rect x="64" y="128" width="128" height="8" fill="#0002"/></g>`;
    case 'shoe':
      return `<g ${g}><path d="M40 176 L44 120 Q80 128 104 112 L132 150 Q190 150 214 168 Q222 184 208 190 L44 190 Z" fill="${fill}"/>
        <rect x="40" y="186" width="176" height="12" rx="5" fill="#fff" stroke="#0003"/></g>`;
    case 'hat':
      return `<g ${g}><ellipse cx="128" cy="176" rx="100" ry="20" fill="${fill}"/>
        <path d="M76 176 Q76 92 128 92 Q180 92 180 176 Z" fill="${fill}"/>
        <rect x="78" y="150" width="100" height="12" fill="#0003"/></g>`;
    default:
      return `<g ${g}><path d="M84 72 L172 72 L196 132 L60 132 Z" fill="${fill}"/>
        <rect x="122" y="132" width="12" height="64" fill="#5f6368"/>
        <rect x="88" y="196" width="80" height="12" rx="6" fill="#5f6368"/></g>`;
  }
}

async function picture(kind, colour, v) {
  const bg = ['#f4f1ec', '#eef2f6', '#f3f3f3'][v % 3];
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">
    <rect width="256" height="256" fill="${bg}"/>${shape(kind, COLOURS[colour], v)}</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

const items = [];
const colourNames = Object.keys(COLOURS);
// How common each colour is (a share of the products), in the order of COLOURS.
const COMMON = [0.85, 0.65, 0.75, 0.95, 0.55, 0.55];
KINDS.forEach((kind, k) =>
  MODELS.forEach((model, v) => {
    const product = k * MODELS.length + v;
    const colours = colourNames.filter(
      (_, c) => ((product * 53 + c * 29 + product * c * 17) % 97) / 97 < COMMON[c],
    );
    for (const colour of colours) {
      const i = items.length;
      items.push({
        // The image server draws `kind-colour-<model number>`: one shape per model.
        id: `${kind}-${colour}-${v + 1}`,
        metadata: {
          parent: `${kind}-${v + 1}`,
          title: `${kind[0].toUpperCase()}${kind.slice(1)} ${model}`,
          category: kind,
          colour,
          brand: BRANDS[product % 3],
          price: 15 + ((product * 37) % 40) * 5,
          instock: i % 5 !== 0,
        },
      });
    }
  }),
);
const blueOrGreen = new Set(
  items
    .filter((it) => ['blue', 'green'].includes(it.metadata.colour))
    .map((it) => it.metadata.parent),
).size;

function imageServer() {
  const cache = new Map();
  const server = http.createServer(async (req, res) => {
    if (req.url === '/broken.png') {
      res.writeHead(200, { 'content-type': 'image/png' });
      return res.end('these bytes are no image');
    }
    const m = /^\/img\/(\w+)-(\w+)-(\d+)\.png$/.exec(req.url ?? '');
    if (!m || !COLOURS[m[2]] || !KINDS.includes(m[1])) {
      res.writeHead(404);
      return res.end('not here');
    }
    if (!cache.has(req.url)) cache.set(req.url, await picture(m[1], m[2], Number(m[3]) - 1));
    res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'max-age=3600' });
    res.end(cache.get(req.url));
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, port: server.address().port })),
  );
}

async function call(base, method, p, token, body) {
  const r = await fetch(base + p, {
    method,
    headers: {
      authorization: `token ${token}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await r.json();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

async function main() {
  const chromiumPath =
    process.env.CHROMIUM_PATH ??
    execFileSync('bash', [path.join(root, 'scripts/chromium.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
      .toString()
      .trim();
  const images = await imageServer();
  const imgBase = `http://127.0.0.1:${images.port}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-screenshots-'));
  const app = await startApp(
    loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      OPERATOR_TOKEN: OPERATOR,
      IMAGE_FETCH_ALLOW_HOSTS: `127.0.0.1:${images.port}`,
      EMBEDDER: 'descriptor',
      WORKER_CONCURRENCY: '4',
      LOG_LEVEL: 'silent',
    }),
    { log: pino({ level: 'silent' }) },
  );
  const api = app.url;
  let browser;
  try {
    const org = await call(api, 'POST', '/orgs', OPERATOR, {
      name: 'acme',
      plan: {
        credits: { limitType: 'fixed', limit: 2000 },
        images: { limitType: 'fixed', limit: 5000 },
      },
    });
    const orgToken = org.token;
    const ds = await call(api, 'POST', '/orgs/acme/datasets', orgToken, { name: 'catalogue' });
    const dsToken = ds.dataset.browse_token;
    const base = '/orgs/acme/datasets/catalogue';
    await call(api, 'POST', `${base}/content`, orgToken, {
      content: [
        ...items.map((it) => ({
          id: it.id,
          url: `${imgBase}/img/${it.id}.png`,
          metadata: it.metadata,
        })),
        { id: 'bag-gone-1', url: `${imgBase}/img/bag-gone-1.png`, metadata: { category: 'bag' } },
        { id: 'hat-gone-2', url: `${imgBase}/broken.png`, metadata: { category: 'hat' } },
      ],
    });
    // A second, younger dataset still below 200 items.
    await call(api, 'POST', '/orgs/acme/datasets', orgToken, { name: 'new-season' });
    await call(api, 'POST', '/orgs/acme/datasets/new-season/content', orgToken, {
      content: items.slice(0, 40).map((it) => ({
        id: `ns-${it.id}`,
        url: `${imgBase}/img/${it.id}.png`,
        metadata: it.metadata,
      })),
    });
    for (;;) {
      const { dataset } = await call(api, 'GET', base, orgToken);
      const c = dataset.counts;
      if (c.pending === 0 && c.processed + c.errors >= c.items) break;
      await sleep(250);
    }
    // Some traffic for the usage panel and the requests chart.
    for (const q of ['', 'colour:red', 'category:bag', 'price:20:80', 'colour:blue|green', 'x:y'])
      for (let k = 0; k < 3; k++)
        await call(api, 'GET', `${base}/search?limit=10&q=${encodeURIComponent(q)}`, dsToken);
    for (const it of items.slice(0, 6))
      await call(api, 'GET', `${base}/similar?id=${it.id}`, dsToken);
    for (const it of items.slice(10, 13))
      await call(api, 'GET', `${base}/explore?id=${it.id}`, dsToken);

    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    const shoot = async (name, width, fn, { full = false } = {}) => {
      const page = await browser.newPage({ viewport: { width, height: width < 600 ? 760 : 860 } });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
      await fn(page);
      await page.waitForTimeout(300);
      const file = path.join(out, `console-${name}-${width}.png`);
      await page.screenshot({ path: file, fullPage: full });
      console.log(`[screenshots] ${path.relative(root, file)}`);
      const unexpected = errors.filter((e) => !/status of 400/.test(e));
      if (unexpected.length) console.warn(`[screenshots] ${name}: ${unexpected.join(' | ')}`);
      await page.close();
    };
    const catalogue = async (page) => {
      await page.goto(`${api}/#token=${dsToken}`);
      await page.locator('ul[aria-label="Catalogue"] .tile img').first().waitFor();
      await page.waitForLoadState('networkidle');
    };
    const detail = async (page) => {
      await catalogue(page);
      await page.locator('ul[aria-label="Catalogue"] .tile').nth(1).click();
      const similar = page.locator('ul[aria-label^="Items similar to"] .tile');
      await similar.first().waitFor();
      await page.waitForLoadState('networkidle');
      // On a wide screen the panel is scrolled to show the first row of similar products (one
      // per other product), under the link to this product's other variants.
      if (page.viewportSize().width > 600)
        await similar.first().evaluate((el) => el.scrollIntoView({ block: 'end' }));
    };
    const organisation = async (page) => {
      await page.goto(`${api}/#token=${orgToken}`);
      await page.locator('table.errors').waitFor();
      await page.locator('.chart rect').first().waitFor();
      await page.locator('.meter').first().waitFor();
    };

    for (const width of [1280, 375]) {
      await shoot('organisation', width, organisation, { full: true });
      await shoot('catalogue', width, async (page) => {
        await catalogue(page);
        if (width > 600) {
          await page
            .locator('fieldset[data-field="colour"] .facet-row', { hasText: 'blue' })
            .locator('input')
            .check();
          await page
            .locator('fieldset[data-field="colour"] .facet-row', { hasText: 'green' })
            .locator('input')
            .check();
          await page.waitForFunction(
            (n) => document.querySelector('.total')?.textContent === String(n),
            blueOrGreen,
          );
          await page.waitForLoadState('networkidle');
        }
      });
      await shoot('detail', width, detail);
      await shoot('q-error', width, async (page) => {
        await catalogue(page);
        await page.fill('#q-input', 'colour:red,price:cheap:50');
        await page.getByRole('button', { name: 'Apply' }).click();
        await page.locator('.q-mark').waitFor();
      });
    }
    await shoot('lens', 1280, async (page) => {
      await catalogue(page);
      await page.locator('[data-testid="lens-input"]').setInputFiles({
        name: 'photo.png',
        mimeType: 'image/png',
        buffer: await picture('shoe', 'blue', 4),
      });
      await page.locator('ul[aria-label="Items similar to the photo"] .tile img').first().waitFor();
      await page.waitForLoadState('networkidle');
    });
    // A scoped link (contract §16): made in the dataset's administration, then opened.
    let shared;
    await shoot('share', 1280, async (page) => {
      await page.goto(`${api}/#token=${orgToken}`);
      const form = page.locator('section.admin[data-dataset="catalogue"] form.scoped-share');
      await form.locator('#scoped-q-input').fill('brand:Acme');
      await form.locator('#scoped-exp').selectOption('604800');
      await form.locator('input[name="types"][value="lens"]').uncheck();
      await form.locator('#scoped-fields').fill('title, parent, category, colour, price');
      await form.getByRole('button', { name: 'Make link' }).click();
      shared = await form.locator('#scoped-link').inputValue();
      await form.evaluate((el) => el.scrollIntoView({ block: 'center' }));
    });
    await shoot('scoped', 1280, async (page) => {
      await page.goto(shared);
      await page.locator('ul[aria-label="Catalogue"] .tile img').first().waitFor();
      await page.waitForLoadState('networkidle');
    });
  } finally {
    await browser?.close();
    await app.stop();
    images.server.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
