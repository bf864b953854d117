/**
 * Contract §16 (scoped tokens), adversarially, on whichever engine the project runs
 * (TEST_SEARCH_BACKEND), over REST and GraphQL. Written from the contract and a test plan made
 * before the code, not from the code.
 *
 * Method: every probe runs twice and the two bodies must be deep-equal after removing
 * request_id: (a) with a scoped token, (b) with the dataset token and the scope added by hand.
 * The scope is `brand:acme`; every item also carries `scopemark` equal to its brand, so the
 * reference adds `scopemark:acme` to the request's q — a different key, hence a true AND (a
 * repeated scalar key would be "last wins", §5). With a `fields` scope the reference also
 * renames every hidden field the request names to `nofield_<name>`, a field no item has, and the
 * hidden keys are removed from the reference's metadata. Answers the reference can't give
 * (an out-of-scope id) are compared with the same request naming an id that does not exist.
 * Every scoped answer is also scanned: no out-of-scope id the request did not name, no word
 * only out-of-scope items carry, and (with `fields`) no hidden metadata key or hidden-only word.
 */
import crypto from 'node:crypto';
import {
  setupDataset,
  startTestApp,
  waitFor,
  waitProcessed,
  type Res,
  type TestApp,
} from '../helpers/app';
import { gql, type GqlResult } from '../helpers/graphql';
import { makeImage, startImageServer, type ImageServer } from '../helpers/image-server';

jest.setTimeout(120_000);

const ORG = 'scorg';
const DS = 'cat';
const N = 264;
const pad = (i: number) => String(i).padStart(3, '0');
const idOf = (i: number) => `s-${pad(i)}`;

/** The allowed metadata fields of the `fields` scope; every other fixture key is hidden. */
const ALLOWED = ['brand', 'price', 'parent', 'tags'];
const HIDDEN = ['cost', 'supplier', 'title', 'scopemark', 'colors', 'sizes', 'clearance'];
const ABSENT = (f: string) => `nofield_${f}`;
const MARK = 'scopemark:acme';
/** Appears only in `title` of out-of-scope items. */
const OUT_WORD = 'zanzibar';
/** Appears only in `supplier` (hidden by the `fields` scope) of in-scope items. */
const HIDDEN_WORD = 'quokka';

interface Md {
  brand: string;
  scopemark: string;
  title: string;
  tags: string[];
  price?: number;
  cost?: number;
  parent?: string;
  supplier?: string;
  /** An array field that is not enabled for querying. */
  colors?: string[];
  /** An enabled array field. */
  sizes?: string[];
  /** Only on some out-of-scope items. */
  clearance?: boolean;
}

function metadataOf(i: number): Md {
  const brand = i % 5 < 3 ? 'acme' : 'other';
  const md: Md = {
    brand,
    scopemark: brand,
    title: brand === 'other' && i % 2 === 0 ? `${OUT_WORD} sandal` : 'classic boot',
    tags: [...new Set([`t${i % 6}`, `t${(i * 7 + 3) % 6}`])],
  };
  if (i % 23 !== 0) md.price = ((i * 37) % 200) + (i % 4 === 0 ? 0.5 : 0);
  if (i % 11 !== 0) md.cost = (i * 13) % 50;
  // groups of four consecutive items: both brands in most groups
  if (i % 19 !== 0) md.parent = `p${String(Math.floor(i / 4) % 50).padStart(2, '0')}`;
  if (brand === 'acme' && i % 3 === 0) md.supplier = `${HIDDEN_WORD} ltd`;
  if (i % 7 !== 0) md.colors = i % 2 ? ['red', 'blue'] : ['green'];
  if (i % 9 !== 0) md.sizes = i % 3 ? ['s', 'm'] : ['l'];
  if (brand === 'other' && i % 4 === 1) md.clearance = true;
  return md;
}

const ALL = Array.from({ length: N }, (_, i) => ({ id: idOf(i), md: metadataOf(i) }));
const IN = ALL.filter((x) => x.md.brand === 'acme').map((x) => x.id);
const OUT = ALL.filter((x) => x.md.brand === 'other').map((x) => x.id);
const IN_SET = new Set(IN);
/** Items whose image fails (never processed): one of each brand. */
const FAILED_OUT = 'x-fail-other';
const FAILED_IN = 'x-fail-acme';
const OUT_ID_RE = new RegExp(`(?<![\\w-])(${[...OUT, FAILED_OUT].join('|')})(?![\\w-])`, 'g');

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
/** Same org: a dataset with 5 processed items (not ready; s-000…s-002 in scope) and an empty one. */
let small: { dsToken: string; base: string; key: string };
let empty: { dsToken: string; base: string; key: string };
/** Another organisation with a dataset of the same name. */
let foreign: Awaited<ReturnType<typeof setupDataset>> & { key: string };
let KEY: string;
/** { q: 'brand:acme' } */
let S1: string;
/** { q: 'brand:acme', fields: ALLOWED } */
let S2: string;
let lensImage: string;

// ---- tokens --------------------------------------------------------------------------------

const b64u = (s: string | Buffer) => Buffer.from(s).toString('base64url');
const sign = (key: string, p: string) =>
  crypto.createHmac('sha256', key).update(p).digest('base64url');
/** st_ + base64url(JSON) + '.' + base64url(HMAC-SHA256(key, P)), as §16 defines it. */
function mint(key: string, payload: unknown, rawJson?: string): string {
  const p = b64u(rawJson ?? JSON.stringify(payload));
  return `st_${p}.${sign(key, p)}`;
}
const scoped = (extra: Record<string, unknown> = {}) => mint(KEY, { q: 'brand:acme', ...extra });

// ---- what a scoped answer may never show ------------------------------------------------------

interface Guard {
  /** The token hides the HIDDEN fields. */
  fields: boolean;
  /** Out-of-scope ids the request itself named (a 404 names them; explore_url carries path). */
  named?: string[];
  /** The request's text: a hidden field's name may show in the answer only if it names it. */
  asked?: string;
}

/** The answer without what merely echoes the request: explore URLs and error texts. */
function withoutEchoes(x: unknown): unknown {
  if (Array.isArray(x)) return x.map((e) => withoutEchoes(e));
  if (x && typeof x === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) {
      if (k === 'error' || k === 'errors' || k === 'explore_url' || k === 'exploreUrl') continue;
      out[k] = withoutEchoes(v);
    }
    return out;
  }
  return x;
}

function leakCheck(label: string, body: unknown, g: Guard): void {
  const text = (JSON.stringify(body) ?? '').replace(/%2C/gi, ',');
  const ids = [...text.matchAll(OUT_ID_RE)]
    .map((m) => m[1]!)
    .filter((id) => !g.named?.includes(id));
  if (ids.length)
    throw new Error(`${label}: out-of-scope ids ${[...new Set(ids)]} in ${text.slice(0, 600)}`);
  const data = JSON.stringify(withoutEchoes(body)) ?? '';
  if (data.includes(OUT_WORD))
    throw new Error(`${label}: out-of-scope word in ${data.slice(0, 600)}`);
  if (!g.fields) return;
  if (data.includes(HIDDEN_WORD))
    throw new Error(`${label}: hidden-field word in ${data.slice(0, 600)}`);
  if (g.asked !== undefined)
    for (const h of HIDDEN) {
      const re = new RegExp(`(?<![\\w])${h}(?![\\w])`);
      if (re.test(text) && !re.test(safeDecode(g.asked)))
        throw new Error(`${label}: the hidden name ${h} shows in ${text.slice(0, 600)}`);
    }
  const walk = (x: unknown, key?: string): void => {
    if (Array.isArray(x)) return x.forEach((e) => walk(e));
    if (!x || typeof x !== 'object') return;
    if (key !== undefined && /^(metadata|md)/.test(key)) {
      const bad = Object.keys(x).filter((k) => HIDDEN.includes(k));
      if (bad.length) throw new Error(`${label}: hidden metadata ${bad} in ${text.slice(0, 600)}`);
    }
    for (const [k, v] of Object.entries(x)) walk(v, k);
  };
  walk(body);
}

// ---- normalisation --------------------------------------------------------------------------

function unhide(s: string): string {
  let out = s;
  for (const h of HIDDEN) out = out.replaceAll(ABSENT(h), h);
  return out.replaceAll(`,${MARK}`, '');
}

/** An explore URL as origin + path + decoded params in order; the reference's mark removed. */
function canonUrl(u: string, ref: boolean): string {
  const url = new URL(u);
  const out: string[] = [];
  for (const [k, v0] of url.searchParams) {
    let v = v0;
    if (ref) {
      if (k === 'q' && v === MARK) continue;
      v = unhide(v);
    }
    out.push(`${k}=${v}`);
  }
  return `${url.origin}${url.pathname}?${out.join('&')}`;
}

function norm(x: unknown, o: { ref: boolean; fields: boolean }, key?: string): unknown {
  if (Array.isArray(x)) return x.map((e) => norm(e, o));
  if (x && typeof x === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) {
      if (k === 'request_id' || k === 'locations') continue;
      // the reference names hidden fields only through nofield_*, so a hidden key is metadata
      if (o.ref && o.fields && HIDDEN.includes(k)) continue;
      const k2 = o.ref ? unhide(k) : k;
      out[k2] = norm(v, o, k2);
    }
    return out;
  }
  if (typeof x === 'string') {
    if ((key === 'explore_url' || key === 'exploreUrl') && /^https?:/.test(x))
      return canonUrl(x, o.ref);
    return o.ref ? unhide(x) : x;
  }
  return x;
}

/** Whole-word renaming of the hidden names (in a query string, a GraphQL text or variables). */
function hideNames(s: string): string {
  let out = s;
  for (const h of HIDDEN) out = out.replace(new RegExp(`(?<![\\w])${h}(?![\\w])`, 'g'), ABSENT(h));
  return out;
}

/** The raw query string with `scopemark:acme` ANDed to each q parameter (or added as q). */
function addMark(qs: string): string {
  const parts = qs === '' ? [] : qs.split('&');
  let found = false;
  const out = parts.map((p) => {
    const eq = p.indexOf('=');
    const k = eq < 0 ? p : p.slice(0, eq);
    let key: string;
    try {
      key = decodeURIComponent(k);
    } catch {
      key = k;
    }
    if (key !== 'q') return p;
    found = true;
    const v = eq < 0 ? '' : p.slice(eq + 1);
    return `${k}=${v === '' ? MARK : `${v},${MARK}`}`;
  });
  if (!found) out.push(`q=${MARK}`);
  return out.join('&');
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Every explore URL of a scoped answer carries the request's own q and fields, never the scope's. */
function urlCheck(label: string, body: unknown, qs: string): void {
  const asked = new URLSearchParams(qs);
  const walk = (x: unknown, key?: string): void => {
    if (Array.isArray(x)) return x.forEach((e) => walk(e));
    if (x && typeof x === 'object') {
      for (const [k, v] of Object.entries(x)) walk(v, k);
      return;
    }
    if (typeof x !== 'string' || (key !== 'explore_url' && key !== 'exploreUrl')) return;
    const u = new URL(x);
    const want = asked.getAll('q');
    if (want.length <= 1 && (u.searchParams.get('q') ?? '') !== (want[0] ?? ''))
      throw new Error(`${label}: explore_url q is not the request's: ${x}`);
    if (
      asked.getAll('fields').length <= 1 &&
      (u.searchParams.get('fields') ?? '') !== (asked.get('fields') ?? '')
    )
      throw new Error(`${label}: explore_url fields is not the request's: ${x}`);
    if (/brand(:|%3A)acme/i.test(x) && !/brand(:|%3A)acme/i.test(safeDecode(qs)))
      throw new Error(`${label}: the scope's q shows in ${x}`);
  };
  walk(body);
}

// ---- REST probes ----------------------------------------------------------------------------

type Scope = 'q' | 'fields';
const tokenOf = (s: Scope) => (s === 'q' ? S1 : S2);

async function call(method: string, p: string, token: string, body?: unknown): Promise<Res> {
  return t.call(method, p, { token, ...(body !== undefined ? { body } : {}) });
}

/**
 * One probe: path?qs with the scoped token against the dataset token with the scope by hand.
 * `mark: false` for routes without q (content/details).
 */
async function same(
  scope: Scope,
  method: string,
  path: string,
  qs: string,
  opts: { body?: unknown; mark?: boolean; named?: string[] } = {},
): Promise<Res> {
  const label = `${scope} ${method} ${path}?${qs}`;
  const a = await call(method, `${ds.base}/${path}?${qs}`, tokenOf(scope), opts.body);
  const hidden = scope === 'fields' ? hideNames(qs) : qs;
  const refQs = opts.mark === false ? hidden : addMark(hidden);
  const b = await call(method, `${ds.base}/${path}?${refQs}`, ds.dsToken, opts.body);
  leakCheck(label, a.body, { fields: scope === 'fields', named: opts.named, asked: qs });
  urlCheck(label, a.body, qs);
  const fields = scope === 'fields';
  expect({ label, status: a.status, body: norm(a.body, { ref: false, fields }) }).toEqual({
    label,
    status: b.status,
    body: norm(b.body, { ref: true, fields }),
  });
  return a;
}

/** Runs probes a few at a time (each is a pair of requests). */
async function each<T>(xs: readonly T[], f: (x: T) => Promise<unknown>, width = 8): Promise<void> {
  for (let i = 0; i < xs.length; i += width) await Promise.all(xs.slice(i, i + width).map(f));
}

const lensBody = () => ({ image: lensImage });

// ---- GraphQL probes -------------------------------------------------------------------------

const apiUrls = () => t.hosts.filter((h) => h.url).map((h) => h.url!);
let gturn = 0;
async function g(
  query: string,
  variables: Record<string, unknown>,
  token: string,
): Promise<GqlResult<any>> {
  const urls = apiUrls();
  return gql<any, Record<string, unknown>>(urls[gturn++ % urls.length]!, query, variables, token);
}

const sortErrors = (r: GqlResult<any>) => ({
  data: r.data,
  errors: r.errors
    ? [...r.errors].sort((x, y) => JSON.stringify(x.path).localeCompare(JSON.stringify(y.path)))
    : undefined,
});

/**
 * A GraphQL probe: every variable named q… gets the mark in the reference; with `fields`, hidden
 * names in the text and variables are renamed.
 */
async function gsame(
  scope: Scope,
  label: string,
  query: string,
  vars: Record<string, unknown>,
  opts: { named?: string[]; errors?: boolean } = {},
): Promise<GqlResult<any>> {
  const fields = scope === 'fields';
  const a = await g(query, vars, tokenOf(scope));
  const refQuery = fields ? hideNames(query) : query;
  const refVars = JSON.parse(fields ? hideNames(JSON.stringify(vars)) : JSON.stringify(vars));
  for (const m of query.matchAll(/\$(q\w*)\s*:/g)) {
    const name = m[1]!;
    refVars[name] = refVars[name] ? `${refVars[name]},${MARK}` : MARK;
  }
  const b = await g(refQuery, refVars, ds.dsToken);
  const l = `${scope} ${label} ${JSON.stringify(vars).slice(0, 300)}`;
  leakCheck(l, a, { fields, named: opts.named, asked: query + JSON.stringify(vars) });
  // a probe that errors proves little: the reference itself must answer
  if (!opts.errors) expect({ l, errors: b.errors }).toEqual({ l, errors: undefined });
  expect({ l, ...(norm(sortErrors(a), { ref: false, fields }) as object) }).toEqual({
    l,
    ...(norm(sortErrors(b), { ref: true, fields }) as object),
  });
  return a;
}

const V = `vision(organisation: "${ORG}", dataset: "${DS}")`;
/** Every way a result shows metadata (the alias limit allows one alias here). */
const ITEM = `fragment R on VisionItem {
  id exploreUrl metadata
  md2: metadata(fields: ["cost", "brand", "price", "title"])
  value(field: "supplier") string(field: "title") number(field: "cost") strings(field: "tags")
  boolean(field: "brand") image { url width height }
}`;
/** Field readers one by one, on details. */
const READERS = `query($ids: [ID!]!) { ${'vision(organisation: "scorg", dataset: "cat")'} { details(ids: $ids) {
  id v1: value(field: "cost") v2: value(field: "brand") v3: value(field: "scopemark") v4: value(field: "title")
  s1: string(field: "title") s2: string(field: "brand") s3: string(field: "supplier")
  n1: number(field: "cost") n2: number(field: "price") ss1: strings(field: "tags") ss2: strings(field: "title")
  b1: boolean(field: "brand") md1: metadata(fields: ["cost"]) md2: metadata
} } }`;

// ---- fixture --------------------------------------------------------------------------------

async function keyOf(base: string, orgToken: string): Promise<string> {
  const r = await t.call('GET', `${base}/scoped-key`, { token: orgToken });
  if (r.status !== 200) throw new Error(`scoped-key: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.key;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- usage and the event log ----------------------------------------------------------------

type UsageRow = { type: string; requests: number };

/** The dataset's usage rows, as /orgs/:org/usage reports them once every charge is recorded. */
async function datasetUsage(): Promise<UsageRow[] | undefined> {
  await t.chargesRecorded();
  const u = await t.call('GET', `/orgs/${ORG}/usage`, { token: ds.orgToken });
  return u.body.usage.datasets[DS]?.usage;
}

const requestsOf = (rows: UsageRow[], type = 'search') =>
  rows.find((r) => r.type === type)?.requests ?? 0;

/** The event log of the dataset with this id, from `from` until a minute ahead (10,000 at most). */
async function eventsOf(datasetId: string, from: number) {
  return t.app.container.ports.events.list(datasetId, { from, to: Date.now() + 60_000 }, 10_000);
}

/** A REST track of one click on `id` in page view `pv`, on one host. */
const trackOn = (host: number, token: string, pv: string, base = ds.base, id = IN[0]!) =>
  t.callOn(host, 'POST', `${base}/track?v=a:click,id:${id},page_view_id:${pv}`, { token });

/** The GraphQL track mutation of one click on IN[1] in page view `pv`. */
const gqlTrack = (pv: string) =>
  `mutation { track(organisation: "${ORG}", dataset: "${DS}", events: [{ v: "a:click,id:${IN[1]},page_view_id:${pv}" }]) }`;

/**
 * Tracks a marker (page view `${pv}-mark`) with a good token and waits until the log shows it,
 * so the log is current; returns the log then, in which to look for page view `pv`.
 */
async function logThroughMarker(
  pv: string,
  token: string,
  where: { name: string; base: string; id: string } = { name: DS, base: ds.base, id: IN[0]! },
) {
  const mark = `${pv}-mark`;
  expect(
    (await call('POST', `${where.base}/track?v=a:click,id:${where.id},page_view_id:${mark}`, token))
      .status,
  ).toBe(202);
  const dataset = await t.app.container.ports.accounts.getDataset(ORG, where.name);
  return waitFor('the marker in the log', async () => {
    const all = await eventsOf(dataset!.id, Date.now() - 120_000);
    return all.some((e) => e.vars?.page_view_id === mark) && all;
  });
}

/** Nothing of page view `pv` is in the log once a later marker is (see logThroughMarker). */
async function expectNothingLogged(
  pv: string,
  token: string,
  where?: Parameters<typeof logThroughMarker>[2],
) {
  const logged = await logThroughMarker(pv, token, where);
  expect(logged.filter((e) => e.vars?.page_view_id === pv)).toEqual([]);
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8', RATE_LIMIT_PER_MINUTE: '100000' });
  ds = await setupDataset(t, ORG, DS);
  const s = await t.call('PUT', `${ds.base}/settings/fields`, {
    token: ds.orgToken,
    body: { fields: { tags: ['*'], sizes: ['*'] } },
  });
  expect(s.status).toBe(200);
  const content = [
    ...ALL.map((x, i) => ({
      id: x.id,
      url: `${img.url}/img/${i}.png`,
      metadata: x.md,
      // private: never shown, whatever a token's fields say
      ...(i % 2 ? { privateMetadata: { margin: i, secretnote: 'wombat' } } : {}),
    })),
    { id: FAILED_OUT, url: `${img.url}/missing.png`, metadata: metadataOf(3) },
    { id: FAILED_IN, url: `${img.url}/missing.png`, metadata: metadataOf(0) },
  ];
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);

  const mk = async (name: string, n: number) => {
    const d = await t.call('POST', `/orgs/${ORG}/datasets`, {
      token: ds.orgToken,
      body: { name },
    });
    expect(d.status).toBe(201);
    const base = `/orgs/${ORG}/datasets/${name}`;
    if (n) {
      const c = await t.call('POST', `${base}/content`, {
        token: ds.orgToken,
        body: {
          content: ALL.slice(0, n).map((x, i) => ({
            id: x.id,
            url: `${img.url}/img/${i}.png`,
            metadata: x.md,
          })),
        },
      });
      expect(c.status).toBe(202);
    }
    return { dsToken: d.body.dataset.browse_token as string, base };
  };
  const sm = await mk('small', 5);
  const em = await mk('empty', 0);
  const fo = await setupDataset(t, 'scother', DS);
  lensImage = `data:image/png;base64,${(await makeImage(7)).toString('base64')}`;
  await waitProcessed(t, ds.base, ds.orgToken, N + 2, 150_000);
  await waitProcessed(t, sm.base, ds.orgToken, 5);
  const d = await t.call('GET', ds.base, { token: ds.orgToken });
  expect(d.body.dataset.counts).toMatchObject({ processed: N, errors: 2 });

  KEY = await keyOf(ds.base, ds.orgToken);
  small = { ...sm, key: await keyOf(sm.base, ds.orgToken) };
  empty = { ...em, key: await keyOf(em.base, ds.orgToken) };
  foreign = { ...fo, key: await keyOf(fo.base, fo.orgToken) };
  S1 = mint(KEY, { q: 'brand:acme' });
  S2 = mint(KEY, { q: 'brand:acme', fields: ALLOWED });
}, 240_000);

afterAll(async () => {
  await t?.stop();
  await img?.close();
});

// ---- the probes -----------------------------------------------------------------------------

describe('minting', () => {
  test('scoped-key, POST scoped-tokens, GraphQL scopedKey/createScopedToken, viewer.kind', async () => {
    expect(KEY).toMatch(/^sk_[A-Za-z0-9_-]+$/);
    // derived, not random: asked again it is the same; another dataset's differs
    expect(await keyOf(ds.base, ds.orgToken)).toBe(KEY);
    expect(small.key).not.toBe(KEY);
    expect(foreign.key).not.toBe(KEY);

    const r = await t.call('POST', `${ds.base}/scoped-tokens`, {
      token: ds.orgToken,
      body: { q: 'brand:acme' },
    });
    expect([r.status, r.body.status]).toEqual([201, 'ok']);
    expect(r.body.token).toMatch(/^st_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    // the server-minted token verifies with the key, and behaves as the locally minted one
    const [p, sig] = (r.body.token as string).slice(3).split('.');
    expect(sign(KEY, p!)).toBe(sig);
    const viaServer = await call(
      'GET',
      `${ds.base}/search?limit=50&fields=*&facets=brand`,
      r.body.token,
    );
    const local = await call('GET', `${ds.base}/search?limit=50&fields=*&facets=brand`, S1);
    expect(viaServer.status).toBe(200);
    expect(norm(viaServer.body, { ref: false, fields: false })).toEqual(
      norm(local.body, { ref: false, fields: false }),
    );

    // a malformed payload is refused at mint time
    for (const bad of [{ q: 'brand:' }, { nope: 1 }, { types: ['bogus'] }, { exp: 'soon' }]) {
      const m = await t.call('POST', `${ds.base}/scoped-tokens`, { token: ds.orgToken, body: bad });
      expect([JSON.stringify(bad), m.status, m.body.error?.code]).toEqual([
        JSON.stringify(bad),
        400,
        'invalid_request',
      ]);
    }

    const gk = await g(
      `{ organisation(name: "${ORG}") { dataset(name: "${DS}") { scopedKey } } }`,
      {},
      ds.orgToken,
    );
    expect(gk.errors).toBeUndefined();
    expect(gk.data.organisation.dataset.scopedKey).toBe(KEY);
    const gm = await g(
      `mutation($s: ScopedTokenInput!) { createScopedToken(organisation: "${ORG}", dataset: "${DS}", scope: $s) }`,
      { s: { q: 'brand:acme', fields: ALLOWED } },
      ds.orgToken,
    );
    expect(gm.errors).toBeUndefined();
    const gt = gm.data.createScopedToken as string;
    expect(gt).toMatch(/^st_/);
    const a = await call('GET', `${ds.base}/search?limit=50&fields=*`, gt);
    const b = await call('GET', `${ds.base}/search?limit=50&fields=*`, S2);
    expect(a.status).toBe(200);
    expect(norm(a.body, { ref: false, fields: true })).toEqual(
      norm(b.body, { ref: false, fields: true }),
    );

    const viewer = await g('{ viewer { kind } }', {}, S1);
    expect(viewer.errors).toBeUndefined();
    expect(String(viewer.data.viewer.kind).toLowerCase()).toBe('scoped');
  });
});

/** q values a shopper may try to widen the scope with (§5 spellings included). */
const WIDENING_Q = [
  '',
  'brand:other',
  'brand:acme|other',
  'brand:other|acme',
  'brand:!acme',
  'brand:!other',
  'brand:%21acme',
  'brand:other,brand:acme',
  'brand:acme,brand:other',
  'brand%3Aother',
  '%62rand:other',
  'brand:other%7Cacme',
  'brand:acme%7Cother',
  'brand:other%2Cbrand:acme',
  'brand%3Aacme%2Cbrand%3Aother',
  'brand%253Aother',
  '%20brand:other',
  'brand%20:other',
  'BRAND:other',
  'brand:other%00',
  'brand:other,brand',
  'price:10:100',
  'price::60,brand:acme|other',
  'tags:t1',
  'tags:t1,tags:t4',
  'parent:p03',
  'parent:!p03',
  'text:classic',
  `text:${OUT_WORD}`,
];

describe('absolute figures from the fixture (the comparisons are not vacuous)', () => {
  test('totals, facets, groups and stats under each scope', async () => {
    const inMd = ALL.filter((x) => IN_SET.has(x.id)).map((x) => x.md);
    const groups = new Set(inMd.map((m, i) => m.parent ?? `own${i}`)).size;
    const withCost = inMd.filter((m) => m.cost !== undefined).length;
    const r1 = await call(
      'GET',
      `${ds.base}/search?limit=0&facets=brand&disjunctive=brand&stats=cost`,
      S1,
    );
    expect(r1.status).toBe(200);
    expect(r1.body.total_results).toBe(IN.length);
    expect(r1.body.facets.brand).toEqual({
      buckets: [{ value: 'acme', count: IN.length }],
      other: 0,
      missing: 0,
    });
    expect(r1.body.stats.cost.count).toBe(withCost);
    const r2 = await call(
      'GET',
      `${ds.base}/search?q=brand:other&limit=0&facets=brand&disjunctive=brand`,
      S2,
    );
    expect(r2.body.total_results).toBe(0);
    expect(r2.body.facets.brand.buckets).toEqual([{ value: 'acme', count: IN.length }]);
    const r3 = await call('GET', `${ds.base}/search?group=parent&limit=2&stats=cost`, S2);
    expect(r3.body.total_groups).toBe(groups);
    expect(r3.body.stats.cost.count).toBe(0);
    const r4 = await call(
      'GET',
      `${ds.base}/similar?id=${IN[0]}&exhaustive=true&q=brand:acme|other`,
      S1,
    );
    expect(r4.body.total_results).toBe(IN.length - 1);
    const all = await call('GET', `${ds.base}/search?limit=2`, ds.dsToken);
    expect(all.body.total_results).toBe(N);
    expect(OUT.length).toBeGreaterThan(50);
  });
});

describe('search: the scope is ANDed into entries and every figure', () => {
  const variants = [
    'fields=*&limit=50',
    'fields=brand,price,parent&limit=7&page=2&sort=price&order=asc',
    'limit=0&facets=brand,parent,tags,price&facet_size=5&stats=price&histogram=price:50',
    'limit=0&facets=brand,tags&disjunctive=brand',
    'group=parent&group_size=3&limit=5&fields=brand,parent&facets=brand,parent&disjunctive=brand',
    'group=parent&limit=10&page=3&facet_scope=items&facets=brand&sort=price&order=desc',
    'group=brand&limit=5&facets=brand&disjunctive=brand',
    'limit=50&page=4&fields=brand&sort=price&order=asc',
  ];
  for (const scope of ['q', 'fields'] as const)
    test(`${scope} scope: OR, negation and encoded q values`, async () => {
      const probes: string[] = [];
      for (const [k, q] of WIDENING_Q.entries()) {
        if (scope === 'fields' && q.startsWith('text:')) continue; // 400 with fields (below)
        // every variant for the plain spellings, three for each other spelling
        const vs =
          k < 6 ? variants : [variants[0]!, variants[2 + (k % 3)]!, variants[(k % 2) + 5]!];
        for (const v of vs) probes.push(q === '' ? v : `q=${q}&${v}`);
      }
      await each(probes, (qs) => same(scope, 'GET', 'search', qs), 10);
    });

  test('the q scope: a word in a field the token may see is ANDed like any condition', async () => {
    await each(
      [
        `q=text:${HIDDEN_WORD}&fields=*&limit=50`,
        `q=text:${HIDDEN_WORD},brand:other&limit=0&facets=brand`,
        // a field only out-of-scope items have (its name is known dataset-wide: documented)
        'sort=clearance&fields=*',
        'group=clearance&limit=5',
        'q=clearance:true',
        'q=clearance:!true&limit=0&facets=clearance,brand',
      ],
      (qs) => same('q', 'GET', 'search', qs),
    );
  });

  test('repeated and encoded parameters', async () => {
    const probes = [
      'q=brand:other&q=brand:acme',
      'q=brand:acme&q=brand:other',
      'Q=brand:other',
      'q[]=brand:other',
      '%71=brand:other',
      'q=brand:other&%71=brand:acme',
      'q=',
      'q=brand:other,',
      'q=brand:',
      'fields=brand&fields=cost',
      'facets=brand&facets=brand&limit=0',
      'limit=0&facets=brand&disjunctive=brand&disjunctive=brand',
      'q=brand:other&q=brand:other&limit=0&facets=brand',
    ];
    for (const scope of ['q', 'fields'] as const)
      await each(probes, (qs) => same(scope, 'GET', 'search', qs));
  });
});

describe('hidden fields behave as absent (fields scope)', () => {
  test('facets, disjunctive, stats, histogram, sort, group, q and fields on hidden names', async () => {
    const probes = [
      'limit=0&facets=cost',
      'limit=0&facets=cost,brand&disjunctive=cost&q=cost:5',
      'limit=0&facets=scopemark,supplier,title',
      'limit=0&stats=cost,price',
      'limit=0&histogram=cost:10',
      'limit=0&histogram=cost:10,price:50',
      'sort=cost',
      'sort=title&order=asc',
      'group=cost',
      'group=supplier&limit=5',
      'q=cost:5',
      'q=cost:!5&limit=50&fields=*',
      'q=cost:1:&limit=0&facets=brand',
      'q=cost::1000&limit=0&stats=price',
      'q=scopemark:acme&limit=0&facets=brand',
      'q=scopemark:!other&limit=0&facets=brand',
      `q=supplier:${HIDDEN_WORD}%20ltd&limit=0&facets=brand`,
      'q=title:classic%20boot',
      'q=title:1:5',
      'q=supplier:!x,title:!y&limit=0&facets=brand',
      'limit=0&histogram=title:10',
      'limit=0&stats=title,supplier',
      'sort=supplier',
      'group=title&group_size=2&limit=5',
      'q=colors:red',
      'q=colors:!red&limit=0&facets=brand',
      'limit=0&facets=colors',
      'q=sizes:m&limit=0&facets=sizes,brand',
      'q=sizes:m,sizes:s',
      'q=sizes:!l&limit=0&facets=brand&disjunctive=sizes',
      'sort=ghost',
      'group=ghost',
      'limit=0&facets=ghost&stats=ghost&histogram=ghost:5',
      'q=ghost:1,tags:t9',
      'sort=clearance',
      'q=clearance:true',
      'limit=0&facets=clearance&stats=clearance',
      'fields=cost',
      'fields=cost,brand,title,supplier,scopemark&limit=50',
      'fields=*&limit=50&page=2',
      'fields=*,cost&limit=5',
      'group=parent&group_size=4&fields=*&limit=10',
    ];
    await each(probes, (qs) => same('fields', 'GET', 'search', qs));
    // content/fields with named hidden fields
    await each(
      [
        'fields=cost',
        'fields=cost,brand,tags&q=price:0:100',
        'fields=title,supplier,scopemark',
        'fields=brand&q=cost:5',
      ],
      (qs) => same('fields', 'GET', 'content/fields', qs),
    );
  });

  test('a word search answers 400 (param q) under fields; without fields it is ANDed', async () => {
    for (const [path, qs] of [
      ['search', `q=text:${HIDDEN_WORD}`],
      ['search', 'q=text:classic'],
      ['search', `q=brand:acme,text:${OUT_WORD}&limit=0&facets=brand`],
      ['similar', `id=${IN[0]}&q=text:classic`],
      ['content/fields', 'fields=brand&q=text:classic'],
    ] as const) {
      const r = await call('GET', `${ds.base}/${path}?${qs}`, S2);
      expect([path, qs, r.status, r.body.error?.code]).toEqual([path, qs, 400, 'invalid_request']);
      expect(r.body.error.details).toEqual(
        expect.arrayContaining([expect.objectContaining({ param: 'q' })]),
      );
    }
    const gr = await g(`{ ${V} { search(q: "text:classic") { totalResults } } }`, {}, S2);
    expect(gr.errors?.[0]?.extensions.code).toBe('invalid_request');
    await each(
      [
        `q=text:${HIDDEN_WORD}&limit=0&facets=brand`,
        `q=text:${OUT_WORD}`,
        'q=text:classic&fields=*&limit=50',
      ],
      (qs) => same('q', 'GET', 'search', qs),
    );
  });

  test('similarity requests grouped by or showing hidden fields', async () => {
    const A = IN[12]!;
    const probes: Array<[string, string]> = [];
    for (const v of [
      'group=cost&limit=6',
      'group=title&group_size=2&limit=5',
      'fields=cost,title,brand&limit=6',
      'q=cost:1:20&limit=6&exhaustive=true',
      'q=colors:red&limit=4',
      'q=sizes:m&limit=4&exhaustive=true',
    ]) {
      probes.push(
        ['similar', `id=${A}&${v}`],
        ['explore', `id=${A}&${v}`],
        ['collection', `ids=${A},${IN[30]}&${v}`],
      );
    }
    await each(probes, ([path, qs]) => same('fields', 'GET', path, qs));
    await each(['group=cost&limit=6', 'q=cost:!3&limit=6&fields=*'], (qs) =>
      same('fields', 'POST', 'search', qs, { body: lensBody() }),
    );
  });

  test('a token allowing a privateMetadata field still never shows or counts it', async () => {
    const P = scoped({ fields: ['brand', 'margin', 'secretnote'] });
    for (const [path, qs] of [
      [
        'search',
        'fields=margin,secretnote,brand&limit=50&facets=margin,secretnote&stats=margin&histogram=margin:20',
      ],
      ['search', 'q=margin:1:&limit=0&facets=brand'],
      ['search', 'q=secretnote:wombat&limit=5'],
      ['search', 'q=margin:!3&limit=0&facets=brand'],
      ['search', 'sort=margin'],
      ['search', 'group=secretnote&limit=3'],
      ['search', 'fields=*&limit=50'],
      ['content/fields', 'fields=margin,brand'],
      ['content/details', `ids=${IN.slice(0, 10).join(',')}&fields=*`],
      ['similar', `id=${IN[1]}&fields=*&q=margin:1:`],
    ] as const) {
      const a = await call('GET', `${ds.base}/${path}?${qs}`, P);
      const ref = path === 'content/details' ? qs : addMark(qs);
      const b = await call('GET', `${ds.base}/${path}?${ref}`, ds.dsToken);
      const strip = (x: unknown) =>
        JSON.parse(JSON.stringify(x), (k, v) =>
          [...HIDDEN, 'parent', 'tags', 'price'].includes(k) ? undefined : v,
        );
      expect([path, qs, a.status, norm(a.body, { ref: false, fields: false })]).toEqual([
        path,
        qs,
        b.status,
        norm(strip(b.body), { ref: true, fields: false }),
      ]);
      expect(JSON.stringify(withoutEchoes(a.body))).not.toContain('wombat');
    }
  });

  test('a token hiding parent: exclude_parent and group=parent see no parent', async () => {
    const S3 = scoped({ fields: ['brand', 'price'] });
    const target = IN.find((id) => metadataOf(Number(id.slice(2))).parent !== undefined)!;
    const a = await call(
      'GET',
      `${ds.base}/similar?id=${target}&exclude_parent=true&limit=12&fields=*`,
      S3,
    );
    const b = await call(
      'GET',
      `${ds.base}/similar?id=${target}&limit=12&fields=*&q=${MARK}`,
      ds.dsToken,
    );
    expect(a.status).toBe(200);
    const strip = (x: unknown) =>
      JSON.parse(JSON.stringify(x), (k, v) =>
        [...HIDDEN, 'parent', 'tags'].includes(k) ? undefined : v,
      );
    expect(norm(a.body, { ref: false, fields: false })).toEqual(
      norm(strip(b.body), { ref: true, fields: false }),
    );
    const c = await call('GET', `${ds.base}/search?group=parent&limit=0&facets=parent`, S3);
    const d = await call(
      'GET',
      `${ds.base}/search?group=nofield_parent&limit=0&facets=nofield_parent&q=${MARK}`,
      ds.dsToken,
    );
    expect([c.status, norm(c.body, { ref: false, fields: false })]).toEqual([
      d.status,
      norm(JSON.parse(JSON.stringify(d.body).replaceAll('nofield_parent', 'parent')), {
        ref: true,
        fields: false,
      }),
    ]);
  });
});

describe('content/details and content/fields', () => {
  test('out-of-scope ids are absent as unknown ones; hidden metadata is not shown', async () => {
    const lists = [
      [IN[0]!, OUT[0]!, 'nope', IN[1]!, OUT[1]!, FAILED_OUT, FAILED_IN],
      [OUT[2]!, OUT[3]!],
      [OUT[4]!, IN[5]!, IN[5]!, OUT[4]!],
      [...IN.slice(0, 20), ...OUT.slice(0, 20)],
      [...ALL.map((x) => x.id).reverse(), FAILED_IN, FAILED_OUT],
    ];
    for (const scope of ['q', 'fields'] as const)
      for (const ids of lists)
        for (const f of ['', '&fields=*', '&fields=brand,cost,title', '&fields=image_url,cost']) {
          const label = `${scope} details ${ids} ${f}`;
          const token = tokenOf(scope);
          const a = await call('GET', `${ds.base}/content/details?ids=${ids.join(',')}${f}`, token);
          const kept = ids.filter((id) => !OUT.includes(id) && id !== FAILED_OUT);
          // (ids may not be empty: an unknown id stands for none)
          const refIds = kept.length ? kept : ['zz-none'];
          const rf = scope === 'fields' ? hideNames(f) : f;
          const b = await call(
            'GET',
            `${ds.base}/content/details?ids=${refIds.join(',')}${rf}`,
            ds.dsToken,
          );
          leakCheck(label, a.body, { fields: scope === 'fields' });
          expect({
            label,
            s: a.status,
            b: norm(a.body, { ref: false, fields: scope === 'fields' }),
          }).toEqual({
            label,
            s: b.status,
            b: norm(b.body, { ref: true, fields: scope === 'fields' }),
          });
        }
  });

  test('content/fields: counts under the scope; names (*) only the allowed ones with fields', async () => {
    for (const scope of ['q', 'fields'] as const)
      await each(
        [
          'fields=brand,parent,tags,price',
          'fields=brand&q=brand:other',
          'fields=brand&q=brand:!acme',
          'fields=brand,tags&q=brand:acme|other',
          'fields=parent&q=%62rand:other',
          'fields=brand&q=brand:acme,brand:other',
          'fields=nothere',
        ],
        (qs) => same(scope, 'GET', 'content/fields', qs),
      );
    const all = await call('GET', `${ds.base}/content/fields?fields=*`, ds.dsToken);
    expect(all.status).toBe(200);
    const names: string[] = all.body.fields;
    expect(names).toEqual(expect.arrayContaining([...ALLOWED, ...HIDDEN]));
    // q scope: the dataset's names (documented: names, no counts)
    const a = await call('GET', `${ds.base}/content/fields?fields=*`, S1);
    expect(a.body).toEqual(all.body);
    // fields scope: the allowed ones that the dataset has, generated fields still visible
    const b = await call('GET', `${ds.base}/content/fields?fields=*`, S2);
    expect(b.status).toBe(200);
    expect(b.body.fields).toEqual(names.filter((n) => !HIDDEN.includes(n)));
    // a token allowing a field no item has does not make it appear
    const c = await call(
      'GET',
      `${ds.base}/content/fields?fields=*`,
      scoped({ fields: ['brand', 'ghost'] }),
    );
    expect(c.body.fields).toEqual(
      names.filter((n) => n === 'brand' || ![...ALLOWED, ...HIDDEN].includes(n)),
    );
    // GraphQL fieldNames likewise
    const gd = await g(`{ ${V} { fieldNames } }`, {}, ds.dsToken);
    const g1 = await g(`{ ${V} { fieldNames } }`, {}, S1);
    const g2 = await g(`{ ${V} { fieldNames } }`, {}, S2);
    expect(g1.data.vision.fieldNames).toEqual(gd.data.vision.fieldNames);
    expect(g2.data.vision.fieldNames).toEqual(
      (gd.data.vision.fieldNames as string[]).filter((n) => !HIDDEN.includes(n)),
    );
  });
});

describe('similarity: scope in every ranking, total and group count; targets outside are unknown', () => {
  const A = IN[3]!;
  const B = IN[10]!;
  const C = IN[40]!;
  const variants = [
    'limit=12&fields=*',
    'limit=6&q=brand:other',
    'limit=6&q=brand:!acme&fields=brand',
    'limit=6&q=brand:acme|other&fields=brand,price,cost',
    'limit=8&q=%62rand:other',
    'limit=8&q=brand:acme,brand:other',
    'limit=8&exhaustive=true',
    'limit=8&exhaustive=true&q=price:0:120',
    'limit=5&page=2&exhaustive=true&fields=*',
    'limit=6&group=parent&group_size=3&fields=parent,brand',
    'limit=6&group=brand',
    'limit=6&diversity=0.6&candidates=40',
    'limit=10&min_score=0.5',
    'limit=50&page=4&exhaustive=true&fields=brand',
  ];
  for (const scope of ['q', 'fields'] as const)
    test(`${scope} scope: similar, explore, collection, lens`, async () => {
      const probes: Array<[string, string, string?]> = [];
      for (const v of variants) {
        probes.push(['similar', `id=${A}&${v}`]);
        probes.push(['similar', `id=${B}&${v}&exclude_parent=true`]);
        if (!v.includes('page=')) probes.push(['explore', `id=${A}&${v}`]);
        if (!v.includes('page=')) probes.push(['explore', `id=${C}&path=${A},${B}&${v}`]);
        probes.push(['collection', `ids=${A},${B}&${v}`]);
        probes.push(['collection', `ids=${A}&negative_ids=${C}&strategy=best_score&${v}`]);
        probes.push(['search', v, 'lens']);
      }
      await each(probes, ([path, qs, lens]) =>
        lens ? same(scope, 'POST', path, qs, { body: lensBody() }) : same(scope, 'GET', path, qs),
      );
    });

  test('a random explore stays in the scope and shows only allowed fields', async () => {
    for (const [tok, fields] of [
      [S1, false],
      [S2, true],
    ] as const)
      for (let k = 0; k < 8; k++) {
        const r = await call(
          'GET',
          `${ds.base}/explore?limit=20&fields=*${k % 2 ? '&q=brand:other' : ''}`,
          tok,
        );
        expect(r.status).toBe(200);
        leakCheck('random explore', r.body, { fields });
        for (const e of r.body.results) expect(IN_SET.has(e.id)).toBe(true);
        if (k % 2) expect(r.body.results).toEqual([]);
        urlCheck('random explore', r.body, `limit=20&fields=*${k % 2 ? '&q=brand:other' : ''}`);
      }
  });

  test('targets, inputs and negatives outside the scope answer as unknown ids', async () => {
    const X = OUT[5]!;
    const Y = OUT[17]!;
    const cases: Array<[string, (x: string) => string]> = [
      ['similar', (x) => `id=${x}`],
      ['similar', (x) => `id=${x}&limit=5&exhaustive=true&fields=*`],
      ['similar', (x) => `id=${x}&group=parent`],
      ['explore', (x) => `id=${x}`],
      ['explore', (x) => `id=${x}&path=${A}`],
      ['collection', (x) => `ids=${A},${x}`],
      ['collection', (x) => `ids=${x}`],
      ['collection', (x) => `ids=${A}&negative_ids=${x}`],
      ['collection', (x) => `ids=${A}&negative_ids=${B},${x}&strategy=best_score`],
    ];
    const billed = await datasetUsage();
    for (const scope of ['q', 'fields'] as const)
      for (const out of [X, Y, FAILED_OUT])
        for (const [path, qs] of cases) {
          const tok = tokenOf(scope);
          const label = `${scope} ${path}?${qs(out)}`;
          const a = await call('GET', `${ds.base}/${path}?${qs(out)}`, tok);
          const unknown = `zz${out}`;
          const b = await call('GET', `${ds.base}/${path}?${qs(unknown)}`, tok);
          const c = await call('GET', `${ds.base}/${path}?${qs(unknown)}`, ds.dsToken);
          leakCheck(label, a.body, { fields: scope === 'fields', named: [out] });
          expect({ label, s: a.status, code: a.body.error?.code }).toEqual({
            label,
            s: 404,
            code: 'not_found',
          });
          const back = (r: Res) =>
            norm(JSON.parse(JSON.stringify(r.body).replaceAll(unknown, out)), {
              ref: false,
              fields: false,
            });
          expect({ label, b: norm(a.body, { ref: false, fields: false }) }).toEqual({
            label,
            b: back(b),
          });
          expect({ label, b: norm(a.body, { ref: false, fields: false }) }).toEqual({
            label,
            b: back(c),
          });
        }
    // a 404 is never billed
    expect(await datasetUsage()).toEqual(billed);
  });

  test('explore path ids outside the scope are dropped like unknown ones', async () => {
    const X = OUT[7]!;
    const Y = OUT[30]!;
    for (const scope of ['q', 'fields'] as const) {
      const tok = tokenOf(scope);
      for (const [withOut, unknown, without] of [
        [`id=${A}&path=${X}`, `id=${A}&path=zz${X}`, `id=${A}`],
        [
          `id=${A}&path=${B},${X},${Y}&limit=8&fields=*`,
          `id=${A}&path=${B},zz${X},zz${Y}&limit=8&fields=*`,
          `id=${A}&path=${B}&limit=8&fields=*`,
        ],
        [
          `id=${C}&path=${X},${A}&exhaustive=true`,
          `id=${C}&path=zz${X},${A}&exhaustive=true`,
          `id=${C}&path=${A}&exhaustive=true`,
        ],
        [
          `id=${C}&path=${Y}&group=parent`,
          `id=${C}&path=zz${Y}&group=parent`,
          `id=${C}&group=parent`,
        ],
      ] as const) {
        const a = await call('GET', `${ds.base}/explore?${withOut}`, tok);
        const b = await call('GET', `${ds.base}/explore?${unknown}`, tok);
        const c = await call('GET', `${ds.base}/explore?${without}`, tok);
        expect(a.status).toBe(200);
        leakCheck(withOut, a.body, { fields: scope === 'fields', named: [X, Y] });
        const back = JSON.parse(
          JSON.stringify(b.body).replaceAll(`zz${X}`, X).replaceAll(`zz${Y}`, Y),
        );
        expect({ withOut, b: norm(a.body, { ref: false, fields: false }) }).toEqual({
          withOut,
          b: norm(back, { ref: false, fields: false }),
        });
        const ranked = (r: Res) => [
          r.body.total_results,
          r.body.results.map((e: any) => [e.id, e.score, e.group?.count]),
        ];
        expect({ withOut, r: ranked(a) }).toEqual({ withOut, r: ranked(c) });
      }
    }
  });

  test('explore_url journeys: followed and edited, they never widen the scope', async () => {
    for (const scope of ['q', 'fields'] as const) {
      const start = await same(scope, 'GET', 'search', 'q=price:0:150&fields=brand,price&limit=5');
      let urls: string[] = start.body.results.map((e: any) => e.explore_url);
      expect(urls.length).toBeGreaterThan(0);
      for (let step = 0; step < 2; step++) {
        const next: string[] = [];
        for (const u of urls.slice(0, 2)) {
          const url = new URL(u);
          const rel = url.pathname.replace(`${ds.base}/`, '');
          const qs = url.search.slice(1);
          expect(rel).toBe('explore');
          const r = await same(scope, 'GET', 'explore', qs);
          expect(r.status).toBe(200);
          next.push(...r.body.results.map((e: any) => e.explore_url));
          // edits a shopper can make
          const p = new URLSearchParams(qs);
          const edits: Array<(e: URLSearchParams) => void> = [
            (e) => e.delete('q'),
            (e) => e.set('q', 'brand:other'),
            (e) => e.set('q', 'brand:acme|other'),
            (e) => e.set('group', 'brand'),
            (e) => e.set('fields', '*'),
          ];
          const edited = edits.map((edit) => {
            const e = new URLSearchParams(p);
            edit(e);
            return e.toString();
          });
          for (const qs2 of edited) await same(scope, 'GET', 'explore', qs2.replace(/\+/g, '%20'));
          const e6 = new URLSearchParams(p);
          const path = e6.get('path');
          const X = OUT[step * 3 + 1]!;
          e6.set('path', path ? `${X},${path}` : X);
          const withOut = await call('GET', `${ds.base}/explore?${e6.toString()}`, tokenOf(scope));
          const e7 = new URLSearchParams(p);
          const without = await call('GET', `${ds.base}/explore?${e7.toString()}`, tokenOf(scope));
          leakCheck('journey', withOut.body, { fields: scope === 'fields', named: [X] });
          const ranked = (r: Res) => r.body.results.map((e: any) => [e.id, e.score]);
          expect(ranked(withOut)).toEqual(ranked(without));
        }
        urls = next;
      }
    }
  });
});

describe('GraphQL', () => {
  const SEARCH = `query($q1: String, $q2: String, $q3: String, $q4: String, $q5: String, $f: FilterInput) {
    ${V} {
      a: search(q: $q1, limit: 5, facets: [{ field: "brand" }, { field: "parent" }, { field: "cost" }, { field: "tags" }],
                stats: ["price", "cost"], histograms: [{ field: "price", interval: 50 }, { field: "cost", interval: 10 }]) {
        totalResults hasNextPage page limit results { ...R }
        facets { field buckets { value count } other missing exact }
        stats { field count min max avg sum } histograms { field buckets { from to count } } }
      b: search(q: $q2, limit: 3, page: 2, sort: "price", order: ASC) { totalResults hasNextPage results { ...R } }
      c: search(q: $q3, group: { field: "parent", size: 3 }, limit: 4, facets: [{ field: "brand", disjunctive: true }, { field: "cost", disjunctive: true }]) {
        totalResults totalGroups totalGroupsExact hasNextPage
        results { ...R group { value count items { ...R } } }
        facets { field buckets { value count } other missing exact } }
      d: search(q: $q4, filter: $f, limit: 5, facets: [{ field: "brand" }]) {
        totalResults hasNextPage results { id metadata } facets { field buckets { value count } other missing } }
      e: search(q: $q5, limit: 50, sort: "price", order: DESC, group: { field: "brand" }) { totalResults totalGroups results { id group { value count } } }
      f: facets(fields: ["brand", "cost", "tags", "parent"], q: $q1) { field values { value count } }
    }
  }
  ${ITEM}`;
  const FILTERS: unknown[] = [
    undefined,
    { where: { field: 'brand', eq: 'other' } },
    { or: [{ where: { field: 'brand', eq: 'other' } }, { where: { field: 'brand', eq: 'acme' } }] },
    { not: { where: { field: 'brand', eq: 'acme' } } },
    { where: { field: 'brand', in: ['other', 'acme'] } },
    { where: { field: 'brand', not: ['acme'] } },
    { where: { field: 'cost', exists: true } },
    { not: { where: { field: 'cost', exists: true } } },
    {
      or: [
        { not: { where: { field: 'scopemark', eq: 'acme' } } },
        { where: { field: 'cost', range: { gte: 10 } } },
      ],
    },
  ];
  for (const scope of ['q', 'fields'] as const)
    test(`${scope} scope: search aliases, fragments, filters, figures`, async () => {
      const qs = [
        '',
        'brand:other',
        'brand:acme|other',
        'brand:!acme',
        'brand:other,brand:acme',
        'price:20:150',
        'tags:t2',
      ];
      const probes: Array<Record<string, unknown>> = [];
      for (let i = 0; i < qs.length; i++)
        for (let j = 0; j < FILTERS.length; j += 2) {
          const q = qs[i] || undefined;
          probes.push({
            q1: q,
            q2: qs[(i + 1) % qs.length] || undefined,
            q3: q,
            q4: qs[(i + 2) % qs.length] || undefined,
            q5: q,
            f: FILTERS[(i + j) % FILTERS.length],
          });
        }
      await each(probes, (vars) => gsame(scope, 'search', SEARCH, vars), 4);
    });

  const SIMILAR = `query($id: ID!, $ids: [ID!]!, $neg: [ID!]!, $path: [ID!]!, $img: String!,
      $q1: String, $q2: String, $q3: String, $q4: String, $q5: String, $q6: String, $q7: String) {
    ${V} {
      s1: similar(id: $id, q: $q1, limit: 6) { ...R score }
      s2: similarPage(id: $id, q: $q2, limit: 5, page: 2, exhaustive: true) { totalResults hasNextPage page results { ...R score } }
      s3: similar(id: $id, q: $q3, group: { field: "parent", size: 2 }, limit: 5) { id score group { value count items { id score metadata } } }
      c1: collectionPage(ids: $ids, negativeIds: $neg, q: $q4, exhaustive: true, limit: 5) { totalResults hasNextPage results { id score metadata } }
      c2: collection(ids: $ids, q: $q4, strategy: BEST_SCORE, limit: 4) { id score }
      e1: explore(id: $id, q: $q5, path: $path, limit: 5) { id score exploreUrl metadata }
      l1: lensPage(image: $img, q: $q6, exhaustive: true, limit: 5) { totalResults results { id score metadata } }
      l2: lens(image: $img, q: $q7, group: { field: "parent" }, limit: 4) { id score group { value count } }
      d: details(ids: $ids) { ...R }
    }
  }
  ${ITEM}`;
  for (const scope of ['q', 'fields'] as const)
    test(`${scope} scope: similarity fields, details`, async () => {
      const qs = ['', 'brand:other', 'brand:acme|other', 'brand:!acme', 'price::100'];
      const probes: Array<Record<string, unknown>> = [];
      for (let i = 0; i < qs.length; i++) {
        const q = (k: number) => qs[(i + k) % qs.length] || undefined;
        probes.push({
          id: IN[i * 7]!,
          ids: [IN[i + 1]!, IN[i + 30]!],
          neg: [IN[i + 50]!],
          path: [IN[i + 60]!],
          img: lensImage,
          q1: q(0),
          q2: q(1),
          q3: q(2),
          q4: q(3),
          q5: q(4),
          q6: q(0),
          q7: q(1),
        });
      }
      await each(probes, (vars) => gsame(scope, 'similarity', SIMILAR, vars), 3);
    });

  test('out-of-scope targets and entities are the same not_found as unknown ids', async () => {
    const X = OUT[9]!;
    const queries: Array<[string, (x: string) => Record<string, unknown>]> = [
      [`query($id: ID!) { ${V} { similar(id: $id) { id } } }`, (x) => ({ id: x })],
      [
        `query($id: ID!) { ${V} { similarPage(id: $id, exhaustive: true) { totalResults } } }`,
        (x) => ({ id: x }),
      ],
      [`query($id: ID!) { ${V} { explore(id: $id) { id } } }`, (x) => ({ id: x })],
      [
        `query($p: [ID!]!) { ${V} { explore(id: "${IN[8]}", path: $p, limit: 6) { id score exploreUrl } } }`,
        (x) => ({ p: [IN[9], x] }),
      ],
      [
        `query($ids: [ID!]!) { ${V} { collection(ids: $ids) { id } } }`,
        (x) => ({ ids: [IN[0], x] }),
      ],
      [
        `query($ids: [ID!]!) { ${V} { collection(ids: ["${IN[0]}"], negativeIds: $ids) { id } } }`,
        (x) => ({ ids: [x] }),
      ],
      [
        `query($ids: [ID!]!) { ${V} { details(ids: $ids) { id metadata } } }`,
        (x) => ({ ids: [x, IN[2]] }),
      ],
      [
        `query($r: [_Any!]!) { _entities(representations: $r) { ... on VisionItem { id metadata exploreUrl similar(limit: 3) { id } } } }`,
        (x) => ({ r: [{ __typename: 'VisionItem', organisation: ORG, dataset: DS, id: x }] }),
      ],
      [
        `query($r: [_Any!]!) { _entities(representations: $r) { ... on VisionItem { id v: value(field: "brand") } } }`,
        (x) => ({
          r: [
            { __typename: 'VisionItem', organisation: ORG, dataset: DS, id: IN[4] },
            { __typename: 'VisionItem', organisation: ORG, dataset: DS, id: x },
          ],
        }),
      ],
    ];
    for (const scope of ['q', 'fields'] as const)
      for (const out of [X, FAILED_OUT])
        for (const [query, vars] of queries) {
          const tok = tokenOf(scope);
          const unknown = `zz${out}`;
          const a = await g(query, vars(out), tok);
          const b = await g(query, vars(unknown), tok);
          const c = await g(query, vars(unknown), ds.dsToken);
          leakCheck(query, a, { fields: scope === 'fields', named: [out] });
          const back = (r: GqlResult<any>) =>
            norm(JSON.parse(JSON.stringify(sortErrors(r)).replaceAll(unknown, out)), {
              ref: false,
              fields: false,
            });
          expect({ query, r: norm(sortErrors(a), { ref: false, fields: false }) }).toEqual({
            query,
            r: back(b),
          });
          if (scope === 'q' && a.errors)
            expect({ query, r: norm(sortErrors(a), { ref: false, fields: false }) }).toEqual({
              query,
              r: back(c),
            });
        }
  });

  test('hidden fields in GraphQL arguments answer as fields no item has (errors included)', async () => {
    const ops = [
      `query($q: String) { ${V} { search(q: $q, sort: "cost") { totalResults } } }`,
      `query($q: String) { ${V} { search(q: $q, sort: "title", order: ASC) { totalResults } } }`,
      `query($q: String) { ${V} { search(q: $q, group: { field: "cost" }, limit: 3) { totalGroups results { id group { value count } } } } }`,
      `query($q: String) { ${V} { search(q: $q, limit: 0, stats: ["title", "cost"], histograms: [{ field: "title", interval: 1 }]) { stats { field count } histograms { field buckets { from count } } } } }`,
      `query($q: String) { ${V} { search(limit: 0, facets: [{ field: "colors" }, { field: "sizes", disjunctive: true }], q: $q) { totalResults facets { field buckets { value count } missing } } } }`,
      `query($f: FilterInput, $q: String) { ${V} { search(q: $q, filter: $f, limit: 0, facets: [{ field: "brand" }]) { totalResults facets { field buckets { value count } } } } }`,
      `query($q: String) { ${V} { facets(fields: ["colors", "cost", "brand"], q: $q) { field values { value count } } } }`,
      `query($q: String) { ${V} { similar(id: "${IN[5]}", q: $q, group: { field: "title" }, limit: 3) { id group { value count } } } }`,
      `query($q: String) { ${V} { similarPage(id: "${IN[5]}", q: $q, exhaustive: true, limit: 3) { totalResults results { id } } } }`,
    ];
    const filters = [
      { where: { field: 'colors', eq: 'red' } },
      { not: { where: { field: 'colors', in: ['red'] } } },
      { where: { field: 'sizes', exists: true } },
      {
        or: [
          { where: { field: 'title', eq: 'classic boot' } },
          { where: { field: 'cost', range: { lte: 5 } } },
        ],
      },
    ];
    const qOf: Record<number, string> = { 4: 'sizes:m', 6: 'colors:red', 8: 'cost:1:30' };
    for (const [k, op] of ops.entries())
      for (const f of op.includes('$f') ? filters : [undefined])
        await gsame(
          'fields',
          'hidden arguments',
          op,
          { ...(f ? { f } : {}), ...(qOf[k] ? { q: qOf[k] } : {}) },
          { errors: true },
        );
  });

  test('field readers on hidden and visible fields', async () => {
    for (const scope of ['q', 'fields'] as const)
      for (const ids of [IN.slice(0, 12), [IN[3]!, OUT[3]!, IN[4]!]]) {
        const a = await g(READERS, { ids }, tokenOf(scope));
        const kept = ids.filter((id) => IN_SET.has(id));
        const vars = { ids: kept };
        const refQuery = scope === 'fields' ? hideNames(READERS) : READERS;
        const b = await g(refQuery, vars, ds.dsToken);
        leakCheck('readers', a, { fields: scope === 'fields' });
        expect(b.errors).toBeUndefined();
        expect(norm(a, { ref: false, fields: scope === 'fields' })).toEqual(
          norm(b, { ref: true, fields: scope === 'fields' }),
        );
      }
  });

  test('entities of another dataset, a missing one or another org: alike', async () => {
    const q = `query($r: [_Any!]!) { _entities(representations: $r) { ... on VisionItem { id } } }`;
    const answers: string[] = [];
    for (const [o, d] of [
      [ORG, 'small'],
      [ORG, 'nosuch'],
      ['scother', DS],
      ['nosuchorg', DS],
    ]) {
      const r = await g(
        q,
        { r: [{ __typename: 'VisionItem', organisation: o, dataset: d, id: 's-000' }] },
        S1,
      );
      expect(r.data?._entities ?? [null]).toEqual([null]);
      answers.push(
        JSON.stringify(norm(r, { ref: false, fields: false }))
          .replaceAll(`"${o}"`, '"O"')
          .replaceAll(`"${d}"`, '"D"')
          .replaceAll(`${o}/${d}`, 'O/D')
          .replaceAll(`'${o}'`, "'O'")
          .replaceAll(`'${d}'`, "'D'"),
      );
    }
    expect(new Set(answers).size).toBe(1);
  });

  test('entities in scope: metadata and VisionItem.similar as the scope allows', async () => {
    const query = `query($r: [_Any!]!, $q1: String) { _entities(representations: $r) { ... on VisionItem {
      ...R similar(limit: 6, q: $q1) { ...R score } } } } ${ITEM}`;
    const r = (ids: string[]) =>
      ids.map((id) => ({ __typename: 'VisionItem', organisation: ORG, dataset: DS, id }));
    for (const scope of ['q', 'fields'] as const)
      for (const q1 of [undefined, 'brand:other', 'brand:!acme'])
        await gsame(scope, 'entities', query, { r: r([IN[6]!, IN[7]!]), q1 });
  });

  test('persisted queries: registered by one token, replayed by the other, each answers its own', async () => {
    const post = async (body: unknown, token: string) => {
      const res = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `token ${token}` },
        body: JSON.stringify(body),
      });
      return (await res.json()) as GqlResult<any>;
    };
    const sha = (s: string) => crypto.createHash('sha256').update(s).digest('hex');
    for (const [first, second] of [
      [ds.dsToken, S1],
      [S2, ds.dsToken],
      [S1, S2],
    ] as const) {
      const query = `query P($q: String) { ${V} { search(q: $q, limit: 10, facets: [{ field: "brand" }, { field: "cost" }]) {
        totalResults results { id metadata } facets { field buckets { value count } missing } } } } # ${first.slice(0, 6)}${second.slice(0, 6)}${Math.random()}`;
      const ext = { persistedQuery: { version: 1, sha256Hash: sha(query) } };
      const vars = { q: 'brand:other|acme' };
      const reg = await post({ query, variables: vars, extensions: ext }, first);
      const direct1 = await post({ query, variables: vars }, first);
      expect(reg.errors).toBeUndefined();
      expect(reg).toEqual(direct1);
      const replay = await post({ variables: vars, extensions: ext }, second);
      const direct2 = await post({ query, variables: vars }, second);
      expect(replay.errors).toBeUndefined();
      expect(replay).toEqual(direct2);
      if (second === S1 || second === S2) leakCheck('apq', replay, { fields: second === S2 });
      const total = (tok: string) => (tok === ds.dsToken ? N : IN.length);
      expect(reg.data.vision.search.totalResults).toBe(total(first));
      expect(replay.data.vision.search.totalResults).toBe(total(second));
    }
  });

  test('a GraphQL field outside the token types is a forbidden field error; the rest answers', async () => {
    const T = scoped({ types: ['search'] });
    const r = await g(
      `{ ${V} { search(limit: 2) { totalResults } similar(id: "${IN[0]}") { id } details(ids: ["${IN[0]}"]) { id } fieldNames } }`,
      {},
      T,
    );
    expect(r.httpStatus).toBe(200);
    expect(r.errors?.map((e) => [e.path, e.extensions.code])).toEqual([
      [['vision', 'similar'], 'forbidden'],
    ]);
    for (const f of [
      'explore { id }',
      `explore(id: "${IN[0]}") { id }`,
      `collection(ids: ["${IN[0]}"]) { id }`,
      `collectionPage(ids: ["${IN[0]}"]) { totalResults }`,
      `similarPage(id: "${IN[0]}") { totalResults }`,
      `lens(image: "${lensImage}") { id }`,
      `lensPage(image: "${lensImage}") { totalResults }`,
    ]) {
      const x = await g(`{ ${V} { ${f} } }`, {}, T);
      expect([f.slice(0, 20), x.httpStatus, x.errors?.map((e) => e.extensions.code)]).toEqual([
        f.slice(0, 20),
        200,
        ['forbidden'],
      ]);
    }
    // nested: a result's own similar is a similar request too
    const nested = await g(
      `{ ${V} { search(limit: 2) { results { id similar(limit: 2) { id } } } } }`,
      {},
      T,
    );
    // (a non-null field's error nulls its parents, so graphql-js may report only the first)
    expect(nested.errors?.length).toBeGreaterThanOrEqual(1);
    expect(new Set(nested.errors?.map((e) => e.extensions.code))).toEqual(new Set(['forbidden']));
    expect(nested.data ?? null).toBeNull();
    const ent = await g(
      `query($r: [_Any!]!) { _entities(representations: $r) { ... on VisionItem { id similar(limit: 2) { id } } } }`,
      { r: [{ __typename: 'VisionItem', organisation: ORG, dataset: DS, id: IN[0] }] },
      T,
    );
    expect(ent.errors?.map((e) => e.extensions.code)).toEqual(['forbidden']);
    const ok = await g(
      `{ ${V} { search(limit: 2) { totalResults } details(ids: ["${IN[0]}", "${OUT[0]}"]) { id } fieldNames facets(fields: ["brand"]) { field values { value count } } } }`,
      {},
      T,
    );
    expect(ok.errors).toBeUndefined();
    expect(ok.data.vision.search.totalResults).toBe(IN.length);
    expect(ok.data.vision.details).toEqual([{ id: IN[0] }]);
    expect(ok.data.vision.facets).toEqual([
      { field: 'brand', values: [{ value: 'acme', count: IN.length }] },
    ]);
  });
});

describe('the token q in other forms', () => {
  const PROBES = [
    'search?limit=50&fields=*&facets=brand,tags&disjunctive=brand',
    'search?q=brand:other|acme&group=parent&limit=5&facets=brand&disjunctive=brand',
    'search?q=brand:!acme&limit=5',
    `similar?id=${IN[2]}&limit=8&exhaustive=true&fields=*`,
    `similar?id=${OUT[2]}`,
    `explore?id=${IN[9]}&limit=6&path=${OUT[1]},${IN[3]}`,
    `collection?ids=${IN[1]},${IN[20]}&limit=6&exhaustive=true`,
    `content/details?ids=${IN[0]},${OUT[0]}&fields=*`,
    'content/fields?fields=brand,parent',
    'content/fields?fields=*',
  ];
  /** Each token must answer every probe exactly as `like` does. */
  const equivalent = async (label: string, token: string, like: string) => {
    for (const p of PROBES) {
      const a = await call('GET', `${ds.base}/${p}`, token);
      const b = await call('GET', `${ds.base}/${p}`, like);
      expect([label, p, a.status, norm(a.body, { ref: false, fields: false })]).toEqual([
        label,
        p,
        b.status,
        norm(b.body, { ref: false, fields: false }),
      ]);
    }
  };
  test('a scope on a field the shopper may not see still applies; OR and negation forms of one scope', async () => {
    await equivalent('q on a hidden field', scoped({ q: 'scopemark:acme', fields: ALLOWED }), S2);
    await equivalent('negation', scoped({ q: 'brand:!other' }), S1);
    await equivalent('OR with a value no item has', scoped({ q: 'brand:acme|nobody' }), S1);
    await equivalent(
      'the key order of the payload',
      mint(KEY, { fields: ALLOWED, q: 'brand:acme' }),
      S2,
    );
    await equivalent(
      'fields listed twice, or with a field no item has',
      scoped({ fields: [...ALLOWED, 'brand', 'ghost'] }),
      S2,
    );
    await equivalent('a payload with spaces', mint(KEY, undefined, ' { "q" : "brand:acme" } '), S1);
  });

  test('a scope on an enabled array field is ANDed with the request (arrays AND repeated keys)', async () => {
    const T = scoped({ q: 'tags:t1' });
    const tagged = ALL.filter((x) => x.md.tags.includes('t1')).map((x) => x.id);
    for (const p of [
      ['search', 'limit=50&fields=*&facets=tags,brand'],
      ['search', 'q=tags:t2&limit=50&facets=tags'],
      ['search', 'q=tags:!t1&limit=5'],
      ['search', 'q=brand:other&group=parent&limit=5'],
      ['similar', `id=${tagged[0]}&limit=6&exhaustive=true`],
      ['content/fields', 'fields=tags,brand&q=tags:t3'],
    ] as const) {
      const a = await call('GET', `${ds.base}/${p[0]}?${p[1]}`, T);
      const qs = new URLSearchParams(p[1]).get('q');
      const ref = qs === null ? `${p[1]}&q=tags:t1` : p[1].replace(`q=${qs}`, `q=${qs},tags:t1`);
      const b = await call('GET', `${ds.base}/${p[0]}?${ref}`, ds.dsToken);
      expect(a.status).toBe(200);
      const fix = (x: unknown) =>
        JSON.parse(
          JSON.stringify(x)
            .replaceAll(',tags:t1', '')
            .replaceAll('&q=tags%3At1', '')
            .replaceAll('q=tags%3At1&', '')
            .replaceAll('%2Ctags%3At1', ''),
        );
      expect([p, norm(a.body, { ref: false, fields: false })]).toEqual([
        p,
        norm(fix(b.body), { ref: false, fields: false }),
      ]);
    }
    // disjunctive relaxes the request's own conditions on the field, never the scope's
    const d = await call(
      'GET',
      `${ds.base}/search?q=tags:t2&limit=0&facets=tags&disjunctive=tags&facet_size=20`,
      T,
    );
    const counts = new Map<string, number>();
    for (const x of ALL)
      if (x.md.tags.includes('t1'))
        for (const v of x.md.tags) counts.set(v, (counts.get(v) ?? 0) + 1);
    const want = [...counts]
      .map(([value, count]) => ({ value, count }))
      .sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : 1));
    expect(d.body.facets.tags).toEqual({ buckets: want, other: 0, missing: 0 });
  });
});

describe('counts never reveal what lies outside the scope', () => {
  test('dataset_not_ready carries no count', async () => {
    const sToken = mint(small.key, { q: 'brand:acme' });
    const eToken = mint(empty.key, { q: 'brand:acme' });
    const bodies: string[] = [];
    // the dataset's own token sees every item, so its 409 may say how many are processed
    for (const [base, tok] of [
      [small.base, small.dsToken],
      [empty.base, empty.dsToken],
    ] as const)
      expect((await call('GET', `${base}/search`, tok)).body.error?.code).toBe('dataset_not_ready');
    for (const [base, tok, name] of [
      [small.base, sToken, 'small'],
      [empty.base, eToken, 'empty'],
    ] as const)
      for (const p of ['search', 'explore', 'search?q=brand:other']) {
        const r = await call('GET', `${base}/${p}`, tok);
        expect([p, r.status, r.body.error?.code]).toEqual([p, 409, 'dataset_not_ready']);
        expect(r.body.error.message).not.toMatch(/\b[35]\b/);
        bodies.push(
          JSON.stringify(norm(r.body, { ref: false, fields: false })).replaceAll(name, 'NAME'),
        );
      }
    expect(new Set(bodies).size).toBe(1);
    // a target outside the scope on a dataset that is not ready: as an unknown id
    for (const [p, u] of [
      ['similar?id=s-003', 'similar?id=zzs-003'],
      ['explore?id=s-004', 'explore?id=zzs-004'],
      ['collection?ids=s-000,s-003', 'collection?ids=s-000,zzs-003'],
    ]) {
      const a = await call('GET', `${small.base}/${p}`, sToken);
      const b = await call('GET', `${small.base}/${u}`, sToken);
      expect([p, a.status, norm(a.body, { ref: false, fields: false })]).toEqual([
        p,
        b.status,
        norm(JSON.parse(JSON.stringify(b.body).replaceAll('zzs-00', 's-00')), {
          ref: false,
          fields: false,
        }),
      ]);
    }
    // exempt routes answer under the scope
    const d = await call(
      'GET',
      `${small.base}/content/details?ids=s-000,s-001,s-002,s-003,s-004`,
      sToken,
    );
    expect(d.status).toBe(200);
    expect(d.body.results.map((e: any) => e.id)).toEqual(['s-000', 's-001', 's-002']);
    const f = await call('GET', `${small.base}/content/fields?fields=brand`, sToken);
    expect(f.body.fields).toEqual({ brand: { acme: 3 } });
  });
});

describe('token checks', () => {
  const probe = async (token: string) => {
    const rest = await call('GET', `${ds.base}/search?limit=2`, token);
    const det = await call('GET', `${ds.base}/content/details?ids=${IN[0]}`, token);
    const gr = await g(`{ ${V} { details(ids: ["${IN[0]}"]) { id } } }`, {}, token);
    return { rest, det, gr };
  };
  const expect401 = async (label: string, token: string, code = 'unauthorized') => {
    const { rest, det, gr } = await probe(token);
    expect({ label, s: rest.status, c: rest.body.error?.code }).toEqual({ label, s: 401, c: code });
    expect({ label, s: det.status, c: det.body.error?.code }).toEqual({ label, s: 401, c: code });
    expect({ label, c: gr.errors?.[0]?.extensions.code, d: gr.data?.vision ?? null }).toEqual({
      label,
      c: code,
      d: null,
    });
    return rest.body;
  };
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const flip = (s: string, i: number) =>
    s.slice(0, i) + alphabet[(alphabet.indexOf(s[i]!) + 1) % 64] + s.slice(i + 1);

  test('a good token answers; every malformed or badly signed one is 401 unauthorized', async () => {
    const good = scoped({ uid: 'tok' });
    const ok = await probe(good);
    expect([ok.rest.status, ok.det.status, ok.gr.errors]).toEqual([200, 200, undefined]);
    const [P, S] = good.slice(3).split('.') as [string, string];
    const sigFailures: unknown[] = [];
    for (const i of [0, 5, Math.floor(P.length / 2), P.length - 2])
      await expect401(`flip P[${i}]`, `st_${flip(P, i)}.${S}`);
    for (const i of [0, 20, 41])
      sigFailures.push(await expect401(`flip S[${i}]`, `st_${P}.${flip(S, i)}`));
    await expect401('P padded', `st_${P}=.${S}`);
    await expect401('S padded', `st_${P}.${S}=`);
    await expect401('P padded, signed', `st_${P}=.${sign(KEY, `${P}=`)}`);
    // the standard alphabet in place of base64url (mint until a '-' or '_' occurs)
    let k = 0;
    let tok = good;
    while (!/[-_]/.test(tok.slice(tok.indexOf('.') + 1)) && k < 500)
      tok = scoped({ uid: `alpha${k++}` });
    const [P2, S2x] = tok.slice(3).split('.') as [string, string];
    await expect401('S in + / alphabet', `st_${P2}.${S2x.replace(/-/g, '+').replace(/_/g, '/')}`);
    k = 0;
    let tok3 = scoped({ uid: '??>>~~' });
    while (!/[-_]/.test(tok3.slice(3, tok3.indexOf('.'))) && k < 500)
      tok3 = scoped({ uid: `?>~${k++}?` });
    const P3 = tok3.slice(3, tok3.indexOf('.'));
    const P3std = P3.replace(/-/g, '+').replace(/_/g, '/');
    await expect401('P in + / alphabet, signed', `st_${P3std}.${sign(KEY, P3std)}`);
    // non-canonical tails: other bits in the last character decode to the same bytes
    const lastBits = (s: string) => s.slice(0, -1) + alphabet[alphabet.indexOf(s.at(-1)!) ^ 1];
    await expect401('S with a non-canonical tail', `st_${P}.${lastBits(S)}`);
    k = 0;
    let tok4 = good;
    while (tok4.slice(3, tok4.indexOf('.')).length % 4 === 0)
      tok4 = scoped({ uid: `tail${'x'.repeat(k++)}` });
    const P4 = lastBits(tok4.slice(3, tok4.indexOf('.')));
    expect(Buffer.from(P4, 'base64url').toString()).toBe(
      Buffer.from(tok4.slice(3, tok4.indexOf('.')), 'base64url').toString(),
    );
    await expect401('P with a non-canonical tail, signed', `st_${P4}.${sign(KEY, P4)}`);
    // payloads that are not the §16 object, each correctly signed
    for (const raw of [
      '[]',
      '["brand:acme"]',
      '"brand:acme"',
      'null',
      '42',
      '{',
      'brand:acme',
      '{"q":"brand:acme","admin":true}',
      '{"q":"brand:acme","dataset":"small"}',
      '{"exp":"soon"}',
      '{"types":["bogus"]}',
      '{"types":"search"}',
      '{"fields":"brand"}',
      '{"rate":"3"}',
      '{"q":5}',
      '{"uid":{}}',
      '{"__proto__":{"fields":["cost"]},"q":"brand:acme"}',
      '{"q":"brand:acme","constructor":{"prototype":{"admin":true}}}',
    ])
      await expect401(`payload ${raw}`, mint(KEY, undefined, raw));
    // wrong keys
    sigFailures.push(
      await expect401('key of another dataset', mint(small.key, { q: 'brand:acme' })),
    );
    sigFailures.push(await expect401('key of another org', mint(foreign.key, { q: 'brand:acme' })));
    sigFailures.push(
      await expect401('the key without sk_', mint(KEY.slice(3), { q: 'brand:acme' })),
    );
    sigFailures.push(
      await expect401('signed with the browse token', mint(ds.dsToken, { q: 'brand:acme' })),
    );
    sigFailures.push(
      await expect401('signed with the org token', mint(ds.orgToken, { q: 'brand:acme' })),
    );
    await expect401('empty', 'st_');
    await expect401('no signature', `st_${P}`);
    await expect401('empty signature', `st_${P}.`);
    await expect401('two dots', `st_${P}.${S}.${S}`);
    await expect401('unsigned payload', `st_${P}.`);
    // a bad signature reads the same whatever its cause
    const texts = sigFailures.map((b) => JSON.stringify(norm(b, { ref: false, fields: false })));
    expect(new Set(texts).size).toBe(1);
  });

  test('a token q the dataset rejects fails closed; empty lists never widen', async () => {
    for (const q of [
      'brand:',
      'colors:red',
      'brand:acme,,',
      ':acme',
      'price:a:b',
      'brand:acme|',
      'brand:!',
    ]) {
      const T = scoped({ q });
      for (const p of [
        'search?limit=50',
        `content/details?ids=${OUT[0]},${IN[0]}`,
        'content/fields?fields=brand',
      ]) {
        const r = await call('GET', `${ds.base}/${p}`, T);
        expect([q, p, [400, 401].includes(r.status)]).toEqual([q, p, true]);
      }
    }
    // fields: [] shows no metadata (or the token is refused)
    const F = scoped({ fields: [] });
    const f = await call('GET', `${ds.base}/search?limit=50&fields=*`, F);
    if (f.status === 200)
      for (const e of f.body.results)
        expect(Object.keys(e.metadata).filter((k) => !/^(image_|service_)/.test(k))).toEqual([]);
    else expect(f.status).toBe(401);
    // unknown or free names in types allow nothing more; rate 0 or below is never unlimited
    for (const extra of [
      { types: ['details'] },
      { types: ['track', 'fields'] },
      { types: ['SEARCH'] },
    ]) {
      const r = await call('GET', `${ds.base}/search?limit=2`, scoped(extra));
      expect([JSON.stringify(extra), [401, 403].includes(r.status)]).toEqual([
        JSON.stringify(extra),
        true,
      ]);
    }
    for (const rate of [0, -1, 0.5]) {
      const r = await call('GET', `${ds.base}/search?limit=2`, scoped({ rate, uid: `r${rate}` }));
      expect([rate, [401, 429].includes(r.status)]).toEqual([rate, true]);
    }
    // a very long payload is refused or answered, never a 500
    const long = scoped({ uid: 'u'.repeat(6000) });
    expect([200, 400, 401, 431]).toContain(
      (await call('GET', `${ds.base}/search?limit=2`, long)).status,
    );
    // encoded spellings of a hidden q key are the hidden field
    for (const [enc, plain] of [
      ['q=%2563ost:5', 'q=cost:5'],
      ['q=%2563ost:!5', 'q=cost:!5'],
      ['q=%2573upplier:quokka%2520ltd', 'q=supplier:x'],
      ['q=%2573copemark:acme', 'q=cost:5'],
    ]) {
      const a = await call('GET', `${ds.base}/search?${enc}&limit=0&facets=brand`, S2);
      const b = await call('GET', `${ds.base}/search?${plain}&limit=0&facets=brand`, S2);
      expect([enc, a.status, norm(a.body, { ref: false, fields: true })]).toEqual([
        enc,
        b.status,
        norm(b.body, { ref: false, fields: true }),
      ]);
    }
    // types: [] allows no billable request (or the token is refused)
    const T = scoped({ types: [] });
    const s = await call('GET', `${ds.base}/search?limit=2`, T);
    expect([401, 403]).toContain(s.status);
  });

  test('an org token mints and reads keys only for its own datasets', async () => {
    for (const [m, p] of [
      ['GET', '/orgs/scother/datasets/cat/scoped-key'],
      ['POST', '/orgs/scother/datasets/cat/scoped-tokens'],
      ['GET', `/orgs/${ORG}/datasets/nosuch/scoped-key`],
      ['POST', `/orgs/${ORG}/datasets/nosuch/scoped-tokens`],
    ] as const) {
      const r = await t.call(m, p, {
        token: ds.orgToken,
        ...(m === 'POST' ? { body: { q: 'brand:acme' } } : {}),
      });
      expect([p, r.status, r.body.error?.code]).toEqual([p, 404, 'not_found']);
      expect(JSON.stringify(r.body)).not.toMatch(/\b(sk|st)_[A-Za-z0-9_-]{20}/);
    }
    const a = await t.call('GET', `${ds.base}/scoped-key`, { token: foreign.orgToken });
    expect([a.status, a.body.error?.code]).toEqual([404, 'not_found']);
    // a dataset token is not an admin token either
    const b = await t.call('GET', `${ds.base}/scoped-key`, { token: ds.dsToken });
    expect([b.status, b.body.error?.code]).toEqual([403, 'forbidden']);
    const c = await t.call('POST', `${ds.base}/scoped-tokens`, {
      token: ds.dsToken,
      body: { q: 'brand:other' },
    });
    expect([c.status, c.body.error?.code]).toEqual([403, 'forbidden']);
  });

  test('exp: past → 401 token_expired; future answers; an expired forgery is unauthorized', async () => {
    const now = Math.floor(Date.now() / 1000);
    await expect401('expired', scoped({ exp: now - 60 }), 'token_expired');
    await expect401('long expired', scoped({ exp: 1 }), 'token_expired');
    const ok = await probe(scoped({ exp: now + 3600 }));
    expect([ok.rest.status, ok.det.status, ok.gr.errors]).toEqual([200, 200, undefined]);
    await expect401('expired and forged', mint(small.key, { q: 'brand:acme', exp: now - 60 }));
    const past = scoped({ exp: now - 60 });
    const [p, s] = past.slice(3).split('.') as [string, string];
    await expect401('expired, flipped', `st_${p}.${flip(s, 3)}`);
  });

  test('a track refused with 401 records nothing', async () => {
    const now = Math.floor(Date.now() / 1000);
    const pv = `refused-${Date.now()}`;
    const good = scoped({ uid: 'refused' });
    const [P, S] = good.slice(3).split('.') as [string, string];
    for (const tok of [
      scoped({ exp: now - 60 }),
      mint(small.key, { q: 'brand:acme' }),
      `st_${P}.${flip(S, 7)}`,
      mint(KEY, undefined, '{"q":"brand:acme","extra":1}'),
    ])
      for (const host of [0, 1]) {
        const r = await trackOn(host, tok, pv);
        expect([host, r.status]).toEqual([host, 401]);
      }
    await expectNothingLogged(pv, good);
  });

  test('types: other request types are 403; details, fields and track always answer', async () => {
    const T = scoped({ types: ['search'] });
    const forbid = [
      ['GET', `similar?id=${IN[0]}`],
      ['GET', `explore?id=${IN[0]}`],
      ['GET', 'explore'],
      ['GET', `collection?ids=${IN[0]}`],
      ['POST', 'search', lensBody()],
    ] as const;
    const billed = await datasetUsage();
    for (const [m, p, body] of forbid) {
      const r = await call(m, `${ds.base}/${p}`, T, body);
      expect([p, r.status, r.body.error?.code]).toEqual([p, 403, 'forbidden']);
    }
    // a 403 is never billed
    expect(await datasetUsage()).toEqual(billed);
    // an out-of-scope target under a refused type: the 403, not a 404 (no membership oracle)
    const x = await call('GET', `${ds.base}/similar?id=${OUT[0]}`, T);
    const u = await call('GET', `${ds.base}/similar?id=zz${OUT[0]}`, T);
    expect([x.status, norm(x.body, { ref: false, fields: false })]).toEqual([
      u.status,
      norm(u.body, { ref: false, fields: false }),
    ]);
    for (const [m, p] of [
      ['GET', 'search?limit=2'],
      ['GET', `content/details?ids=${IN[0]}`],
      ['GET', 'content/fields?fields=*'],
      ['GET', 'content/fields?fields=brand'],
      ['POST', `track?v=a:click,id:${IN[0]}`],
      ['POST', `track?v=a:click,id:${OUT[0]}`],
    ] as const) {
      const r = await call(m, `${ds.base}/${p}`, T);
      expect([p, r.status]).toEqual([p, m === 'POST' ? 202 : 200]);
    }
    const S = scoped({ types: ['similar', 'lens'] });
    expect((await call('GET', `${ds.base}/search`, S)).status).toBe(403);
    expect((await call('GET', `${ds.base}/similar?id=${IN[0]}`, S)).status).toBe(200);
    expect((await call('POST', `${ds.base}/search`, S, lensBody())).status).toBe(200);
    const gt = await g(
      `mutation { track(organisation: "${ORG}", dataset: "${DS}", events: [{ v: "a:click,id:${IN[0]}" }]) }`,
      {},
      T,
    );
    expect(gt.errors).toBeUndefined();
    expect(gt.data.track).toBe(1);
  });

  test('st_ on admin endpoints is 403 and changes nothing', async () => {
    const E = mint(empty.key, { q: 'brand:acme' });
    const D = `/orgs/${ORG}/datasets`;
    const cases: Array<[string, string, unknown?]> = [
      ['POST', '/orgs', { name: 'sneaky' }],
      ['GET', `/orgs/${ORG}`],
      ['PUT', `/orgs/${ORG}/plan`, { plan: { credits: { limitType: 'unlimited' } } }],
      ['GET', `/orgs/${ORG}/tokens`],
      ['POST', `/orgs/${ORG}/tokens`, {}],
      ['GET', `/orgs/${ORG}/usage`],
      ['GET', D],
      ['POST', D, { name: 'sneaky' }],
      ['GET', `${D}/empty`],
      ['DELETE', `${D}/empty`],
      ['POST', `${D}/empty/browse_token`, {}],
      ['PUT', `${D}/empty/settings/fields`, { fields: { tags: ['*'] } }],
      ['GET', `${D}/empty/analytics`],
      ['GET', `${D}/empty/content`],
      ['POST', `${D}/empty/content`, { content: [{ id: 'z', url: `${img.url}/img/1.png` }] }],
      ['PUT', `${D}/empty/content`, { content: [{ id: 'z', metadata: { a: 1 } }] }],
      ['DELETE', `${D}/empty/content`, { ids: ['z'] }],
      ['GET', `${D}/empty/errors`],
      ['GET', `${D}/empty/scoped-key`],
      ['POST', `${D}/empty/scoped-tokens`, { q: 'brand:other' }],
      ['GET', `${D}/${DS}`],
      ['GET', `${D}/${DS}/scoped-key`],
      ['POST', `${D}/${DS}/scoped-tokens`, {}],
      ['GET', `${D}/${DS}/analytics`],
      ['GET', `${D}/${DS}/content`],
      ['POST', `${D}/${DS}/browse_token`, {}],
    ];
    for (const tok of [E, S1])
      for (const [m, p, body] of cases) {
        const r = await call(m, p, tok, body);
        expect([m, p, r.status, r.body.error?.code]).toEqual([m, p, 403, 'forbidden']);
      }
    for (const [query, tok] of [
      [`{ organisation(name: "${ORG}") { name } }`, S1],
      [`{ organisation(name: "${ORG}") { dataset(name: "${DS}") { scopedKey } } }`, S1],
      [
        `{ organisation(name: "${ORG}") { dataset(name: "${DS}") { analytics { searches } } } }`,
        S1,
      ],
      [`{ organisation(name: "${ORG}") { usage { lastUpdated } } }`, S1],
      [`mutation { rotateBrowseToken(organisation: "${ORG}", dataset: "empty") { name } }`, E],
      [
        `mutation { createScopedToken(organisation: "${ORG}", dataset: "${DS}", scope: { q: "brand:other" }) }`,
        S1,
      ],
      [
        `mutation { deleteContent(organisation: "${ORG}", dataset: "${DS}", ids: ["${IN[0]}"]) }`,
        S1,
      ],
      [`mutation { createDataset(organisation: "${ORG}", name: "sneaky") { name } }`, S1],
    ] as const) {
      const r = await g(query, {}, tok);
      expect([query, r.errors?.[0]?.extensions.code, r.data ?? null]).toEqual([
        query,
        'forbidden',
        null,
      ]);
    }
    // nothing changed: the tokens still work, the dataset and its content are there
    expect((await call('GET', `${empty.base}/content/details?ids=z`, E)).status).toBe(200);
    expect(
      (await call('GET', `${ds.base}/content/details?ids=${IN[0]}`, ds.dsToken)).body.results,
    ).toHaveLength(1);
    const list = await t.call('GET', `/orgs/${ORG}/datasets`, { token: ds.orgToken });
    expect(list.body.datasets.map((d: any) => d.name).sort()).toEqual([DS, 'empty', 'small']);
    const e = await t.call('GET', `${empty.base}/content`, { token: ds.orgToken });
    expect(e.body.content).toEqual([]);
  });

  test('admin endpoints answer a scoped token alike whether the organisation or dataset exists', async () => {
    const shapes: Array<[string, (o: string, d: string) => string, unknown?]> = [
      ['GET', (o) => `/orgs/${o}`],
      ['GET', (o) => `/orgs/${o}/usage`],
      ['GET', (o) => `/orgs/${o}/datasets`],
      ['GET', (o, d) => `/orgs/${o}/datasets/${d}`],
      ['GET', (o, d) => `/orgs/${o}/datasets/${d}/scoped-key`],
      ['POST', (o, d) => `/orgs/${o}/datasets/${d}/scoped-tokens`, { q: 'brand:other' }],
      ['GET', (o, d) => `/orgs/${o}/datasets/${d}/analytics`],
      ['GET', (o, d) => `/orgs/${o}/datasets/${d}/content`],
      ['GET', (o, d) => `/orgs/${o}/datasets/${d}/errors`],
    ];
    for (const [m, path, body] of shapes) {
      const bodies: string[] = [];
      for (const [o, d] of [
        [ORG, DS],
        [ORG, 'nosuch'],
        ['nosuchorg', DS],
        ['scother', DS],
      ] as const) {
        const r = await call(m, path(o, d), S1, body);
        expect([path(o, d), r.status]).toEqual([path(o, d), 403]);
        bodies.push(
          JSON.stringify(norm(r.body, { ref: false, fields: false }))
            .replaceAll(o, 'O')
            .replaceAll(d, 'D'),
        );
      }
      expect([path('O', 'D'), new Set(bodies).size]).toEqual([path('O', 'D'), 1]);
    }
    for (const o of [ORG, 'nosuchorg']) {
      const r = await g(`{ organisation(name: "${o}") { name } }`, {}, S1);
      expect([o, r.errors?.[0]?.extensions.code]).toEqual([o, 'forbidden']);
    }
  });

  test('on another dataset of the org, a missing dataset or organisation: 401, all alike', async () => {
    const bodies: string[] = [];
    for (const p of [
      `${small.base}/content/details?ids=s-000`,
      `${small.base}/search`,
      `/orgs/${ORG}/datasets/nosuch/search`,
      `/orgs/${ORG}/datasets/nosuch/content/details?ids=s-000`,
      `/orgs/nosuchorg/datasets/${DS}/search`,
      `/orgs/scother/datasets/${DS}/search`,
      `/orgs/scother/datasets/${DS}/content/details?ids=s-000`,
    ]) {
      const r = await call('GET', p, S1);
      expect([p, r.status, r.body.error?.code]).toEqual([p, 401, 'unauthorized']);
      bodies.push(JSON.stringify(norm(r.body, { ref: false, fields: false })));
    }
    expect(new Set(bodies).size).toBe(1);
    for (const [o, d] of [
      [ORG, 'small'],
      [ORG, 'nosuch'],
      ['nosuchorg', DS],
      ['scother', DS],
    ])
      for (const tok of [S1, S2]) {
        const r = await g(
          `{ vision(organisation: "${o}", dataset: "${d}") { details(ids: ["s-000"]) { id } } }`,
          {},
          tok,
        );
        expect([o, d, r.errors?.[0]?.extensions.code]).toEqual([o, d, 'unauthorized']);
      }
  });

  test('path and header spellings never answer unscoped', async () => {
    const unscoped = (r: Res) => r.status === 200 && r.body.total_results !== IN.length;
    for (const p of [
      `${ds.base}/search/`,
      `${ds.base}//search`,
      `/orgs/${ORG}/datasets/${DS}/./search`,
      `/orgs/${ORG}/datasets/${DS}/x/../search`,
      `/orgs/${ORG}/datasets/${DS.toUpperCase()}/search`,
      `/orgs/${ORG}/datasets/%63at/search`,
      `/orgs/${ORG}/datasets/${DS}%2Fsearch`,
      `/orgs/${ORG}/datasets/${DS}/search;x`,
      `/orgs/${ORG}/datasets/${DS}/search?q=brand:other&q=`,
    ]) {
      const r = await call('GET', p, S1);
      expect([p, r.status, unscoped(r)]).toEqual([p, r.status, false]);
    }
    for (const h of [
      `Token ${S1}`,
      `token  ${S1}`,
      `Bearer ${S1}`,
      `token ${S1}, token ${ds.dsToken}`,
      `token ${ds.dsToken}, token ${S1}`,
      `token ${S1} ${ds.dsToken}`,
      `token ${S1}${ds.dsToken}`,
    ]) {
      const r = await t.call('GET', `${ds.base}/search?limit=2`, { headers: { authorization: h } });
      expect([h.slice(0, 12), r.status, unscoped(r)]).toEqual([h.slice(0, 12), r.status, false]);
      if (r.status !== 200) expect(r.status).toBe(401);
    }
    // the signing key is not a token anywhere
    for (const [m, p] of [
      ['GET', `${ds.base}/search?limit=2`],
      ['GET', `${ds.base}/content/details?ids=${IN[0]}`],
      ['GET', `${ds.base}/scoped-key`],
      ['GET', `/orgs/${ORG}/datasets`],
    ] as const) {
      const r = await call(m, p, KEY);
      expect([p, r.status, r.body.error?.code]).toEqual([p, 401, 'unauthorized']);
    }
    // the same token in a query parameter is no token
    const q = await t.call('GET', `${ds.base}/search?limit=2&token=${S1}`, {});
    expect(q.status).toBe(401);
  });

  test('rotating the browse token invalidates every scoped token at once, on every host', async () => {
    const before = mint(small.key, { q: 'brand:acme' });
    for (const host of [0, 1]) {
      const ok = await t.callOn(host, 'GET', `${small.base}/content/details?ids=s-000`, {
        token: before,
      });
      expect(ok.status).toBe(200);
    }
    const rot = await t.callOn(0, 'POST', `${small.base}/browse_token`, { token: ds.orgToken });
    expect(rot.body.dataset?.browse_token).toMatch(/^ds_/);
    // the first request after the rotation, on each host, is a write: refused, and nothing written
    const pv = `rot-${Date.now()}`;
    for (const host of [1, 0]) {
      const r = await trackOn(host, before, pv, small.base, 's-000');
      expect([host, r.status, r.body.error?.code]).toEqual([host, 401, 'unauthorized']);
    }
    for (const host of [1, 0]) {
      const r = await t.callOn(host, 'GET', `${small.base}/content/details?ids=s-000`, {
        token: before,
      });
      expect([host, r.status, r.body.error?.code]).toEqual([host, 401, 'unauthorized']);
    }
    const gr = await g(
      `{ vision(organisation: "${ORG}", dataset: "small") { details(ids: ["s-000"]) { id } } }`,
      {},
      before,
    );
    expect(gr.errors?.[0]?.extensions.code).toBe('unauthorized');
    const key2 = await keyOf(small.base, ds.orgToken);
    expect(key2).not.toBe(small.key);
    const after = mint(key2, { q: 'brand:acme' });
    for (const host of [1, 0]) {
      const r = await t.callOn(host, 'GET', `${small.base}/content/details?ids=s-000,s-001`, {
        token: after,
      });
      expect([host, r.status, r.body.results?.map((e: any) => e.id)]).toEqual([
        host,
        200,
        ['s-000', 's-001'],
      ]);
    }
    small.key = key2;
    small.dsToken = rot.body.dataset.browse_token;
    // a marker tracked with the new token shows the log is current; the refused events are absent
    await expectNothingLogged(pv, after, { name: 'small', base: small.base, id: 's-000' });
  });
});

describe('rate and uid', () => {
  const usageOf = async (type = 'search') => requestsOf((await datasetUsage()) ?? [], type);
  /** Away from the end of a UTC minute, so a fixed window can't reset within the test. */
  const midWindow = async () => {
    while (Date.now() % 60_000 > 50_000) await sleep(250);
  };

  test('rate:3 admits three requests per minute across hosts, then 429 with Retry-After; refusals are not billed', async () => {
    await midWindow();
    const R = scoped({ rate: 3, uid: `rate-${Date.now()}` });
    const before = await usageOf();
    for (let i = 0; i < 3; i++) {
      const r = await t.callOn(i, 'GET', `${ds.base}/search?limit=2`, { token: R });
      expect([i, r.status]).toEqual([i, 200]);
    }
    for (let i = 0; i < 2; i++) {
      const r = await t.callOn(i, 'GET', `${ds.base}/search?limit=2`, { token: R });
      expect([i, r.status, r.body.error?.code]).toEqual([i, 429, 'rate_limited']);
      const ra = Number(r.headers.get('retry-after'));
      expect(ra).toBeGreaterThanOrEqual(1);
      expect(ra).toBeLessThanOrEqual(60);
    }
    // a free request is a request of this token too
    const d = await t.callOn(1, 'GET', `${ds.base}/content/details?ids=${IN[0]}`, { token: R });
    expect(d.status).toBe(429);
    // other tokens keep their own allowance
    expect((await call('GET', `${ds.base}/search?limit=2`, S1)).status).toBe(200);
    // every answer's charge, exactly, once recorded
    expect(await usageOf()).toBe(before + 4);

    // GraphQL: every aliased field takes from the allowance
    await midWindow();
    const R2 = scoped({ rate: 3, uid: `rate2-${Date.now()}` });
    const before2 = await usageOf();
    const r = await g(
      `{ ${V} { a: search(limit: 2) { totalResults } b: search(limit: 2) { totalResults } c: search(limit: 2) { totalResults } d: search(limit: 2) { totalResults } } }`,
      {},
      R2,
    );
    expect(r.httpStatus).toBe(200);
    // (the refused field is non-null, so its error may null the whole answer)
    expect(r.errors?.map((e) => e.extensions.code)).toEqual(['rate_limited']);
    if (r.data)
      expect(Object.values(r.data.vision ?? {}).filter((x) => x !== null)).toHaveLength(3);
    const again = await g(`{ ${V} { search(limit: 2) { totalResults } } }`, {}, R2);
    expect(again.errors?.map((e) => e.extensions.code)).toEqual(['rate_limited']);
    // nested similar fields of results are requests of the token too
    const R3 = scoped({ rate: 3, uid: `rate3-${Date.now()}` });
    const similarBefore = await usageOf('similar');
    const nested = await g(
      `{ ${V} { search(limit: 5) { results { id similar(limit: 2) { id } } } } }`,
      {},
      R3,
    );
    // (a non-null field's error nulls its parents, so graphql-js may report only the first)
    expect(nested.errors?.length).toBeGreaterThanOrEqual(1);
    expect(new Set(nested.errors?.map((e) => e.extensions.code))).toEqual(
      new Set(['rate_limited']),
    );
    const after = await call('GET', `${ds.base}/content/details?ids=${IN[0]}`, R3);
    expect(after.status).toBe(429);
    expect(await usageOf()).toBeLessThanOrEqual(before2 + 3 + 1);
    expect(await usageOf('similar')).toBeLessThanOrEqual(similarBefore + 2);
  });

  test('a track refused by rate (429) records nothing', async () => {
    await midWindow();
    const R = scoped({ rate: 2, uid: `rate-track-${Date.now()}` });
    for (let i = 0; i < 2; i++)
      expect((await t.callOn(i, 'GET', `${ds.base}/search?limit=2`, { token: R })).status).toBe(
        200,
      );
    // a refused track records nothing
    const pv = `rate-track-${Date.now()}`;
    for (const host of [0, 1]) {
      const tr = await trackOn(host, R, pv);
      expect([host, tr.status]).toEqual([host, 429]);
    }
    const gt = await g(gqlTrack(pv), {}, R);
    expect(gt.errors?.map((e) => e.extensions.code)).toEqual(['rate_limited']);
    await expectNothingLogged(pv, S1);
  });

  test('uid is recorded as user_id unless the request gives one', async () => {
    const uid = `shopper-${Date.now()}`;
    const U = scoped({ uid });
    const dataset = await t.app.container.ports.accounts.getDataset(ORG, DS);
    const since = Date.now() - 1000;
    const pv = `pv-${uid}`;
    expect(
      (await call('GET', `${ds.base}/search?limit=2&v=a:search,page_view_id:${pv}-1`, U)).status,
    ).toBe(200);
    expect(
      (await call('GET', `${ds.base}/search?limit=2&v=page_view_id:${pv}-2,user_id:own-1`, U))
        .status,
    ).toBe(200);
    expect(
      (await call('GET', `${ds.base}/similar?id=${IN[0]}&v=page_view_id:${pv}-3`, U)).status,
    ).toBe(200);
    expect(
      (await call('POST', `${ds.base}/track?v=a:click,id:${IN[0]},page_view_id:${pv}-4`, U)).status,
    ).toBe(202);
    expect(
      (
        await call(
          'POST',
          `${ds.base}/track?v=a:click,id:${IN[1]},page_view_id:${pv}-5,user_id:own-2`,
          U,
        )
      ).status,
    ).toBe(202);
    const r = await call('POST', `${ds.base}/track`, U, {
      events: [{ v: `a:view,id:${IN[2]},page_view_id:${pv}-6` }],
    });
    expect(r.status).toBe(202);
    const events = await waitFor('six events', async () => {
      const all = await eventsOf(dataset!.id, since);
      const mine = all.filter((e) => e.vars?.page_view_id?.startsWith(pv));
      return mine.length >= 6 && mine;
    });
    const byPv = Object.fromEntries(
      events.map((e) => [e.vars!.page_view_id!.slice(pv.length + 1), e.vars!.user_id]),
    );
    expect(byPv).toEqual({ '1': uid, '2': 'own-1', '3': uid, '4': uid, '5': 'own-2', '6': uid });
    // the scope is not written into the request facts' filters
    for (const e of events) expect(JSON.stringify(e.vars)).not.toContain('brand');
  });
});

describe('changes while tokens are in use (last: they edit the fixture)', () => {
  test('an item leaving the scope is never shown with out-of-scope metadata, on any host', async () => {
    const M = IN[100]!;
    const seen: string[] = [];
    let polling = true;
    const poll = (async () => {
      for (let k = 0; polling; k++) {
        const [d, s, q] = await Promise.all([
          t.callOn(k, 'GET', `${ds.base}/content/details?ids=${M}&fields=brand,price`, {
            token: S1,
          }),
          t.callOn(k + 1, 'GET', `${ds.base}/similar?id=${M}&limit=3&fields=brand`, {
            token: S1,
          }),
          t.callOn(k, 'GET', `${ds.base}/search?q=brand:acme|other&fields=brand&limit=50`, {
            token: S2,
          }),
        ]);
        for (const r of [d, s, q])
          for (const e of r.body.results ?? [])
            if (e.metadata?.brand !== 'acme')
              seen.push(`${e.id} shown as ${JSON.stringify(e.metadata)} (host ${k % 2})`);
      }
    })();
    await sleep(300);
    const w = await t.call('PUT', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content: [{ id: M, metadata: { brand: 'other', scopemark: 'other' } }] },
    });
    expect(w.status).toBe(202);
    await waitFor('the move seen by the dataset token', async () => {
      const r = await t.call('GET', `${ds.base}/content/details?ids=${M}&fields=brand`, {
        token: ds.dsToken,
      });
      return r.body.results?.[0]?.metadata?.brand === 'other';
    });
    await sleep(2500);
    polling = false;
    await poll;
    expect(seen).toEqual([]);
    // settled: the item is unknown to the token
    const x = await call('GET', `${ds.base}/similar?id=${M}`, S1);
    const u = await call('GET', `${ds.base}/similar?id=zz${M}`, S1);
    expect([x.status, norm(x.body, { ref: false, fields: false })]).toEqual([
      u.status,
      norm(JSON.parse(JSON.stringify(u.body).replaceAll(`zz${M}`, M)), {
        ref: false,
        fields: false,
      }),
    ]);
    // back in the scope
    await t.call('PUT', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content: [{ id: M, metadata: { brand: 'acme', scopemark: 'acme' } }] },
    });
    await waitFor('the item back in the scope', async () => {
      const r = await call('GET', `${ds.base}/content/details?ids=${M}`, S1);
      return r.body.results?.length === 1;
    });
  });

  test('a token whose q the settings no longer allow fails closed on every host', async () => {
    const T = scoped({ q: 'sizes:m' });
    const before = await call('GET', `${ds.base}/search?limit=0&facets=sizes`, T);
    expect(before.status).toBe(200);
    expect(before.body.total_results).toBe(ALL.filter((x) => x.md.sizes?.includes('m')).length);
    const s = await t.call('PUT', `${ds.base}/settings/fields`, {
      token: ds.orgToken,
      body: { fields: { tags: ['*'] } },
    });
    expect(s.status).toBe(200);
    try {
      // within the 1 s the contract allows a host to apply settings: never unscoped
      const end = Date.now() + 1500;
      while (Date.now() < end)
        for (const host of [0, 1]) {
          const r = await t.callOn(host, 'GET', `${ds.base}/search?limit=0&facets=sizes`, {
            token: T,
          });
          if (r.status === 200) expect(r.body.total_results).toBe(before.body.total_results);
          else expect([host, r.status, r.body.error?.code]).toEqual([host, 400, 'invalid_request']);
        }
      for (const host of [0, 1]) {
        const r = await t.callOn(host, 'GET', `${ds.base}/content/details?ids=${IN[0]}`, {
          token: T,
        });
        expect([host, r.status, r.body.error?.code]).toEqual([host, 400, 'invalid_request']);
      }
    } finally {
      await t.call('PUT', `${ds.base}/settings/fields`, {
        token: ds.orgToken,
        body: { fields: { tags: ['*'], sizes: ['*'] } },
      });
    }
  });

  test('a dataset deleted and made again under its name has a new key: old tokens stay dead', async () => {
    const E = mint(empty.key, { q: 'brand:acme' });
    expect((await call('GET', `${empty.base}/content/details?ids=a`, E)).status).toBe(200);
    const del = await t.call('DELETE', empty.base, { token: ds.orgToken });
    expect(del.status).toBe(200);
    const gone = await call('GET', `${empty.base}/content/details?ids=a`, E);
    expect([gone.status, gone.body.error?.code]).toEqual([401, 'unauthorized']);
    const again = await t.call('POST', `/orgs/${ORG}/datasets`, {
      token: ds.orgToken,
      body: { name: 'empty' },
    });
    expect(again.status).toBe(201);
    for (const host of [0, 1]) {
      const r = await t.callOn(host, 'GET', `${empty.base}/content/details?ids=a`, { token: E });
      expect([host, r.status, r.body.error?.code]).toEqual([host, 401, 'unauthorized']);
    }
    const key = await keyOf(empty.base, ds.orgToken);
    expect(key).not.toBe(empty.key);
    expect((await call('GET', `${empty.base}/content/details?ids=a`, mint(key, {}))).status).toBe(
      200,
    );
  });

  test('rotating the browse token: old scoped tokens die at once, the old browse token within 2 s; what they send is not recorded', async () => {
    const U = scoped({ uid: 'rot-shopper' });
    const old = [S1, S2, U, ds.dsToken];
    // every host has just served these tokens
    for (const tok of old)
      for (const host of [0, 1]) {
        const r = await t.callOn(host, 'GET', `${ds.base}/search?limit=2`, { token: tok });
        expect([host, r.status]).toEqual([host, 200]);
      }
    const billed = (await datasetUsage())!;
    const rot = await t.callOn(1, 'POST', `${ds.base}/browse_token`, { token: ds.orgToken });
    expect(rot.body.dataset?.browse_token).toMatch(/^ds_/);
    const pv = `rot-main-${Date.now()}`;
    // the first requests after the rotation, on each host: writes and billable reads
    for (const tok of [U, S1])
      for (const host of [0, 1]) {
        const tr = await trackOn(host, tok, pv);
        expect([host, 'track', tr.status]).toEqual([host, 'track', 401]);
      }
    for (const [k, url] of apiUrls().entries()) {
      const gt = await gql<any, Record<string, unknown>>(url, gqlTrack(pv), {}, S2);
      expect([k, gt.errors?.[0]?.extensions.code]).toEqual([k, 'unauthorized']);
    }
    for (const tok of [S1, S2, U])
      for (const host of [0, 1]) {
        const r = await t.callOn(host, 'GET', `${ds.base}/search?limit=2&v=page_view_id:${pv}`, {
          token: tok,
        });
        expect([host, r.status]).toEqual([host, 401]);
      }
    // the old browse token is a stored token: another host may still accept it for up to 2 s
    // (contract §12); scoped tokens above die at once, their key being the rotation's
    let lateBrowse = 0;
    for (const host of [0, 1])
      await waitFor(
        `the old browse token refused on host ${host}`,
        async () => {
          const r = await t.callOn(host, 'GET', `${ds.base}/search?limit=2`, {
            token: ds.dsToken,
          });
          if (r.status === 200) lateBrowse += 1;
          return r.status === 401;
        },
        2_000,
      );
    const key = await keyOf(ds.base, ds.orgToken);
    expect(key).not.toBe(KEY);
    const fresh = mint(key, { q: 'brand:acme' });
    const r = await call('GET', `${ds.base}/search?limit=2`, fresh);
    expect([r.status, r.body.total_results]).toEqual([200, IN.length]);
    // a marker from the new token shows the log is current
    const logged = await logThroughMarker(pv, fresh);
    const after = (await datasetUsage())!;
    // only the fresh token's search is billed (and what the old browse token was still allowed)
    expect(requestsOf(after)).toBe(requestsOf(billed) + 1 + lateBrowse);
    // nothing the dead tokens sent is recorded
    expect(logged.filter((e) => e.vars?.page_view_id === pv)).toEqual([]);
  });
});
