import fc from 'fast-check';
import { LIMITS } from '../../src/domain/limits';
import {
  AddContentDocument,
  StoredItemDocument,
  UpdateContentDocument,
} from '../graphql/generated';
import { gql } from '../helpers/graphql';
import { setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

interface Doc {
  id: string;
  metadata: Record<string, unknown>;
}
const CATS = ['boots', 'heels', 'flats'];
const docs: Doc[] = Array.from({ length: 210 }, (_, i) => {
  const md: Record<string, unknown> = {
    category: CATS[i % 3],
    instock: i % 2 === 0,
    title: `Item ${i} ${i % 4 === 0 ? 'red leather' : 'blue suede'}`,
    sizes: i % 5 === 0 ? ['s', 'm'] : ['m', 'l'],
    mixed: i % 7 === 0 ? `s${i % 3}` : i % 11,
  };
  if (i % 10 !== 9) md.price = (i % 40) * 1.5;
  if (i % 3 === 0) md.rank = i;
  return { id: `s-${String(i).padStart(3, '0')}`, metadata: md };
});

/**
 * privateMetadata no Vision API request may probe (contract §6): keys of its own, keys shared
 * with metadata but holding other values or other kinds, and a rank that orders the items
 * against their ids.
 */
const privateOf = (i: number) => ({
  margin: i,
  supplier: `sup-${i % 4}`,
  codes: ['x', 'y'],
  category: 'vault',
  instock: 'hidden',
  title: ['secret words'],
  rank: 1000 - i,
});

const search = (qs: string) => t.call('GET', `${ds.base}/search?${qs}`, { token: ds.dsToken });
const ids = (r: { body: { results: Array<{ id: string }> } }) => r.body.results.map((x) => x.id);
const byId = (a: Doc, b: Doc) => (a.id < b.id ? -1 : 1);
const allIds = async (qs: string) => {
  const out: string[] = [];
  for (let page = 1; ; page++) {
    const r = await search(`${qs}&limit=50&page=${page}`);
    expect(r.status).toBe(200);
    out.push(...ids(r));
    if (r.body.results.length < 50) return { ids: out, total: r.body.total_results as number };
  }
};

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  const content = docs.map((d, i) => ({
    id: d.id,
    url: `${img.url}/img/${i}.png`,
    metadata: d.metadata,
    privateMetadata: privateOf(i),
  }));
  const posted = await t.call('POST', `${ds.base}/content`, {
    token: ds.orgToken,
    body: { content: content.slice(0, 150) },
  });
  expect(posted.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, 150);
}, 120_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

describe('before 200 processed items', () => {
  it('the Vision API answers 409 dataset_not_ready; details and fields still work', async () => {
    const r = await search('');
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('dataset_not_ready');
    expect(r.body.error.message).toContain('150');
    expect(
      (await t.call('GET', `${ds.base}/content/details?ids=s-000`, { token: ds.dsToken })).status,
    ).toBe(200);
    expect(
      (await t.call('GET', `${ds.base}/content/fields?fields=*`, { token: ds.dsToken })).status,
    ).toBe(200);
    expect((await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset.status).toBe(
      'pending',
    );
    // validation first: a similar request without its id is a 400 even on a dataset not ready
    const noId = await t.call('GET', `${ds.base}/similar`, { token: ds.dsToken });
    expect([noId.status, noId.body.error.details]).toEqual([
      400,
      [{ param: 'id', message: 'the id of a dataset item' }],
    ]);
    expect((await t.call('GET', `${ds.base}/similar?id=s-000`, { token: ds.dsToken })).status).toBe(
      409,
    );
  });

  it('then publishes once 200 are processed', async () => {
    const content = docs.slice(150).map((d, i) => ({
      id: d.id,
      url: `${img.url}/img/${150 + i}.png`,
      metadata: d.metadata,
      privateMetadata: privateOf(150 + i),
    }));
    const posted = await t.call('POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content },
    });
    expect(posted.status).toBe(202);
    await waitProcessed(t, ds.base, ds.orgToken, 210);
    expect((await t.call('GET', ds.base, { token: ds.orgToken })).body.dataset.status).toBe(
      'published',
    );
  }, 120_000);
});

describe('search', () => {
  it('pages through everything, newest first by default, with total_results', async () => {
    const r = await search('');
    expect(r.body.total_results).toBe(210);
    expect(r.body.results).toHaveLength(10);
    const all = await allIds('');
    expect(new Set(all.ids).size).toBe(210);
    // the second batch was written later, so it leads service_updated_at desc
    expect(all.ids.slice(0, 60).every((id) => Number(id.slice(2)) >= 150)).toBe(true);
  });

  const model = (pred: (m: Record<string, any>) => boolean) =>
    docs
      .filter((d) => pred(d.metadata))
      .map((d) => d.id)
      .sort();
  it.each([
    ['category:boots', (m: any) => m.category === 'boots'],
    ['category:boots|heels', (m: any) => m.category !== 'flats'],
    ['category:!boots|heels', (m: any) => m.category === 'flats'],
    ['category:%21boots', (m: any) => m.category !== 'boots'],
    ['instock:true', (m: any) => m.instock === true],
    ['price:10:20', (m: any) => m.price !== undefined && m.price >= 10 && m.price <= 20],
    ['price:30:', (m: any) => m.price >= 30],
    ['price::3', (m: any) => m.price !== undefined && m.price <= 3],
    ['price:!0', (m: any) => m.price !== 0],
    ['price:4.5', (m: any) => m.price === 4.5],
    ['mixed:3', (m: any) => m.mixed === 3],
    ['mixed:s1', (m: any) => m.mixed === 's1'],
    ['text:RED', (m: any) => m.title.includes('red')],
    [
      'text:blue%20suede,category:heels',
      (m: any) => m.title.includes('blue suede') && m.category === 'heels',
    ],
    ['category:boots,category:heels', (m: any) => m.category === 'heels'],
    ['nosuchfield:x', () => false],
    ['nosuchfield:!x', () => true],
  ])('q=%s matches the model', async (q, pred) => {
    const got = await allIds(`q=${q}&sort=price&order=asc`);
    expect(got.ids.slice().sort()).toEqual(model(pred));
    expect(got.total).toBe(got.ids.length);
  });

  it('never returns privateMetadata, whatever fields says', async () => {
    for (const fields of ['*', 'margin,supplier,codes,category,rank']) {
      const r = await search(`q=category:boots&fields=${fields}&limit=50`);
      for (const entry of r.body.results as Array<{ id: string; metadata: object }>) {
        const pub = docs.find((d) => d.id === entry.id)!.metadata;
        expect(Object.keys(entry.metadata)).not.toEqual(
          expect.arrayContaining([expect.stringMatching(/^(margin|supplier|codes)$/)]),
        );
        expect(entry.metadata).toMatchObject({ category: 'boots' });
        if (fields !== '*') expect(entry.metadata).toEqual({ category: 'boots', rank: pub.rank });
        expect(JSON.stringify(entry.metadata)).not.toMatch(/vault|hidden|secret|sup-/);
      }
    }
  });

  it('refuses array fields until enabled, then ANDs repeated keys', async () => {
    const refused = await search('q=category:boots,sizes:s');
    expect(refused.status).toBe(400);
    expect(refused.body.error.details[0]).toMatchObject({
      param: 'q',
      position: 15,
      field: 'sizes',
    });
    expect(refused.body.error.message).toContain('/settings/fields');
    await t.call('PUT', `${ds.base}/settings/fields`, {
      token: ds.orgToken,
      body: { fields: { sizes: ['s', 'm'] } },
    });
    expect((await allIds('q=sizes:s')).ids.sort()).toEqual(model((m) => m.sizes.includes('s')));
    expect((await allIds('q=sizes:s,sizes:m')).ids.sort()).toEqual(
      model((m) => m.sizes.includes('s') && m.sizes.includes('m')),
    );
    expect((await allIds('q=sizes:!s')).ids.sort()).toEqual(model((m) => !m.sizes.includes('s')));
    const notEnabled = await search('q=sizes:l');
    expect(notEnabled.status).toBe(400);
    expect(notEnabled.body.error.details[0].value).toBe('l');
  });

  it('sorts numbers ascending and descending with missing values last and ties by id', async () => {
    const withPrice = docs.filter((d) => d.metadata.price !== undefined);
    const missing = docs
      .filter((d) => d.metadata.price === undefined)
      .sort(byId)
      .map((d) => d.id);
    const asc = withPrice
      .slice()
      .sort((a, b) => (a.metadata.price as number) - (b.metadata.price as number) || byId(a, b))
      .map((d) => d.id);
    const desc = withPrice
      .slice()
      .sort((a, b) => (b.metadata.price as number) - (a.metadata.price as number) || byId(a, b))
      .map((d) => d.id);
    expect((await allIds('sort=price&order=asc')).ids).toEqual([...asc, ...missing]);
    expect((await allIds('sort=price&order=desc')).ids).toEqual([...desc, ...missing]);
  });

  it('sorts a field of mixed types: numbers, then strings, then missing', async () => {
    const got = (await allIds('sort=mixed&order=asc')).ids;
    const kinds = got.map((id) => typeof docs.find((d) => d.id === id)!.metadata.mixed);
    expect(kinds.lastIndexOf('number')).toBeLessThan(kinds.indexOf('string'));
  });

  it('sorts strings and generated fields', async () => {
    const cat = (await allIds('sort=category&order=asc')).ids;
    expect(cat).toEqual(
      docs
        .slice()
        .sort((a, b) =>
          (a.metadata.category as string) < (b.metadata.category as string)
            ? -1
            : a.metadata.category === b.metadata.category
              ? byId(a, b)
              : 1,
        )
        .map((d) => d.id),
    );
    expect((await search('sort=image_width')).status).toBe(200);
    const created = (await allIds('sort=service_created_at&order=asc')).ids;
    expect(created.slice(0, 150).every((id) => Number(id.slice(2)) < 150)).toBe(true);
  });

  it('pages are consistent slices', async () => {
    const all = (await allIds('sort=price&order=asc')).ids;
    const p3 = await search('sort=price&order=asc&limit=7&page=3');
    expect(ids(p3)).toEqual(all.slice(14, 21));
    const beyond = await search('limit=50&page=10');
    expect(beyond.status).toBe(200);
    expect(beyond.body.results).toEqual([]);
    expect(beyond.body.total_results).toBe(210);
  });

  it('projects fields and builds explore_url carrying fields, q and limit', async () => {
    const r = await search('q=category%3Aboots&fields=category,price&limit=3&sort=price&order=asc');
    expect(r.body.results[0]).toEqual({
      id: 's-000',
      explore_url: `${t.url}${ds.base}/explore?id=s-000&fields=category%2Cprice&q=category%3Aboots&limit=3`,
      metadata: { category: 'boots', price: 0 },
    });
    const none = await search('limit=2');
    expect(none.body.results[0].metadata).toEqual({});
  });

  it.each([
    ['limit=1', 'limit'],
    ['limit=51', 'limit'],
    ['limit=x', 'limit'],
    ['page=0', 'page'],
    ['page=201&limit=50', 'page'],
    ['order=up', 'order'],
    ['sort=nosuch', 'sort'],
    ['sort=sizes', 'sort'],
    ['sort=instock', 'sort'],
    ['v=broken', 'v'],
    ['q=price:1:2:3', 'q'],
  ])('%s → 400 naming %s', async (qs, param) => {
    const r = await search(qs);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.details[0].param).toBe(param);
  });

  it('accepts action variables', async () => {
    expect((await search('v=a:exit,user_id:abc,page_view_id:12345')).status).toBe(200);
  });
});

describe('content/fields', () => {
  it('lists public and generated field names with *', async () => {
    const r = await t.call('GET', `${ds.base}/content/fields?fields=*`, { token: ds.dsToken });
    expect(r.body.fields).toEqual(
      expect.arrayContaining([
        'category',
        'price',
        'title',
        'sizes',
        'image_width',
        'image_url',
        'service_created_at',
      ]),
    );
    expect(r.body.fields).not.toContain('margin');
  });

  it('counts values of named fields under q', async () => {
    const r = await t.call(
      'GET',
      `${ds.base}/content/fields?fields=category,instock,sizes&q=price:0:3`,
      { token: ds.dsToken },
    );
    const matching = docs.filter(
      (d) => d.metadata.price !== undefined && (d.metadata.price as number) <= 3,
    );
    const count = (f: (d: Doc) => boolean) => matching.filter(f).length;
    expect(r.body.fields.category).toEqual(
      Object.fromEntries(
        CATS.map((c) => [c, count((d) => d.metadata.category === c)]).filter(([, n]) => n),
      ),
    );
    expect(r.body.fields.instock).toEqual({
      true: count((d) => d.metadata.instock === true),
      false: count((d) => d.metadata.instock === false),
    });
    expect(r.body.fields.sizes.m).toBe(matching.length);
    const price = await t.call('GET', `${ds.base}/content/fields?fields=price&q=price:1.5`, {
      token: ds.dsToken,
    });
    expect(price.body.fields.price).toEqual({
      '1.5': docs.filter((d) => d.metadata.price === 1.5).length,
    });
    expect((await t.call('GET', `${ds.base}/content/fields`, { token: ds.dsToken })).status).toBe(
      400,
    );
  });
});

describe('keys named like object internals', () => {
  const INTERNAL = [
    'constructor',
    '__proto__',
    'toString',
    'hasOwnProperty',
    'valueOf',
    'prototype',
  ];

  it('behave like any field no item has in q, sort, fields and content/fields', async () => {
    for (const k of INTERNAL) {
      const q = await search(`q=${k}:1&limit=5`);
      expect([q.status, q.body.total_results]).toEqual([200, 0]);
      const excluded = await search(`q=${k}:!1&limit=5`);
      expect([excluded.status, excluded.body.total_results]).toEqual([200, docs.length]);
      const sorted = await search(`sort=${k}&limit=5`);
      expect([sorted.status, sorted.body.error.message]).toEqual([
        400,
        `unknown sort field '${k}' (no item has it)`,
      ]);
      const fields = await search(`fields=${k}&limit=2`);
      expect([fields.status, fields.body.results[0].metadata]).toEqual([200, {}]);
      const counts = await t.call('GET', `${ds.base}/content/fields?fields=${k}`, {
        token: ds.dsToken,
      });
      expect([counts.status, counts.body.fields[k]]).toEqual([200, {}]);
    }
  });

  it('never answer 5xx, whatever the key and value (property)', async () => {
    const key = fc.oneof(
      fc.constantFrom(...INTERNAL, 'category', 'sizes', 'price'),
      fc.string({ minLength: 1, maxLength: 12 }),
    );
    await fc.assert(
      fc.asyncProperty(key, fc.string({ maxLength: 8 }), async (k, v) => {
        const e = encodeURIComponent;
        for (const qs of [`q=${e(k)}:${e(v)}`, `sort=${e(k)}`, `fields=${e(k)}`]) {
          const r = await search(`${qs}&limit=2`);
          expect(r.status).toBeLessThan(500);
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe('privateMetadata cannot be probed (contract §6)', () => {
  const everything = docs.map((d) => d.id).sort();

  it.each([
    ['margin:5', []],
    ['margin:5:7', []],
    ['margin:0:', []],
    ['margin:!5', everything],
    ['supplier:sup-1', []],
    ['supplier:sup-1|sup-2', []],
    ['supplier:!sup-1', everything],
    ['codes:x', []],
    ['codes:!x', everything],
    ['category:vault', []],
    ['category:!vault', everything],
    ['instock:hidden', []],
    ['title:secret%20words', []],
    ['text:vault', []],
    ['text:secret', []],
    ['text:hidden', []],
  ])('q=%s matches like a field no item has', async (q, expected) => {
    const got = await allIds(`q=${q}`);
    expect(got.ids.sort()).toEqual(expected);
    expect(got.total).toBe(expected.length);
  });

  it('keeps the public value of a key that is in both', async () => {
    const pub = (await allIds('q=category:boots')).ids.sort();
    expect(pub).toEqual(docs.filter((d) => d.metadata.category === 'boots').map((d) => d.id));
    const ranked = docs.filter((d) => d.metadata.rank !== undefined);
    expect((await allIds('q=rank:0:30')).ids.sort()).toEqual(
      ranked.filter((d) => (d.metadata.rank as number) <= 30).map((d) => d.id),
    );
    // 970–1000 are private ranks only
    expect((await allIds('q=rank:970:1000')).total).toBe(0);
  });

  it('resolves q and sort against public fields only', async () => {
    // a private array is not an array field, and does not make a public string one
    for (const q of ['codes:x', 'title:x', 'title:!x'])
      expect((await search(`q=${q}&limit=2`)).status).toBe(200);
    for (const k of ['margin', 'supplier', 'codes']) {
      const r = await search(`sort=${k}&limit=2`);
      expect([r.status, r.body.error?.message]).toEqual([
        400,
        `unknown sort field '${k}' (no item has it)`,
      ]);
    }
    // instock is boolean in metadata; its private string does not make it sortable
    expect((await search('sort=instock&limit=2')).body.error.message).toContain('boolean');
  });

  it('sorts by the public values: items with only a private one come last, by id', async () => {
    const ranked = docs
      .filter((d) => d.metadata.rank !== undefined)
      .sort((a, b) => (a.metadata.rank as number) - (b.metadata.rank as number));
    const rest = docs.filter((d) => d.metadata.rank === undefined).map((d) => d.id);
    expect((await allIds('sort=rank&order=asc')).ids).toEqual([
      ...ranked.map((d) => d.id),
      ...rest,
    ]);
    expect((await allIds('sort=rank&order=desc')).ids).toEqual([
      ...ranked.reverse().map((d) => d.id),
      ...rest,
    ]);
  });

  it('has no values and no name in content/fields', async () => {
    const fields = (qs: string) =>
      t.call('GET', `${ds.base}/content/fields?${qs}`, { token: ds.dsToken });
    const names = (await fields('fields=*')).body.fields;
    expect(names).toEqual(expect.arrayContaining(['category', 'rank', 'instock']));
    for (const k of ['margin', 'supplier', 'codes']) expect(names).not.toContain(k);
    const counts = await fields('fields=margin,supplier,codes,category,instock');
    expect(counts.body.fields).toEqual({
      margin: {},
      supplier: {},
      codes: {},
      category: Object.fromEntries(
        CATS.map((c) => [c, docs.filter((d) => d.metadata.category === c).length]),
      ),
      instock: { true: 105, false: 105 },
    });
    const probed = await fields('fields=category&q=supplier:sup-1');
    expect(probed.body.fields).toEqual({ category: {} });
  });

  it('narrows similarity and explore like a field no item has', async () => {
    const explore = await t.call('GET', `${ds.base}/explore?q=supplier:sup-1`, {
      token: ds.dsToken,
    });
    expect([explore.status, explore.body.results]).toEqual([200, []]);
    const similar = await t.call('GET', `${ds.base}/similar?id=s-001&q=margin:!1`, {
      token: ds.dsToken,
    });
    expect(similar.status).toBe(200);
    expect(similar.body.results.length).toBeGreaterThan(1);
    const none = await t.call('GET', `${ds.base}/similar?id=s-001&q=margin:0:`, {
      token: ds.dsToken,
    });
    expect(none.body.results.map((r: { id: string }) => r.id)).toEqual(['s-001']);
  });
});

describe('metadata under any key and value, written through REST and GraphQL (property)', () => {
  let meta: Awaited<ReturnType<typeof setupDataset>>;
  beforeAll(async () => {
    // a dataset of its own, so the figures above stay as they are
    meta = await setupDataset(t, 'props', 'meta');
  });

  const RESERVED = [
    'image_width',
    'image_height',
    'image_url',
    'service_created_at',
    'service_updated_at',
  ];
  const MAX = LIMITS.metadataStringMaxBytes;

  /** interface.md's metadata rules and docs/limits.md, written apart from the code under test. */
  function valid(key: string, v: unknown): boolean {
    if (key.length < 1 || key.length > LIMITS.metadataKeyMaxLength) return false;
    if (RESERVED.includes(key)) return false;
    const text = (s: string) => Buffer.byteLength(s, 'utf8') <= MAX;
    const num = (n: unknown) => typeof n === 'number' && Number.isFinite(n);
    if (typeof v === 'string') return text(v);
    if (typeof v === 'boolean' || num(v)) return true;
    if (!Array.isArray(v) || v.length > LIMITS.metadataArrayMaxLength) return false;
    return v.every((e) => typeof e === 'string' && text(e)) || v.every(num);
  }

  const lone = fc.string({
    unit: fc.constantFrom('\uD800', '\uDFFF', 'a'),
    minLength: 1,
    maxLength: 3,
  });
  // Long values are named by a token and made in the run, so a counterexample stays readable.
  // A Map: the tokens are looked up with the generated keys, `__proto__` among them.
  const LONG = new Map<string, string>([
    ['<MAX x>', 'x'.repeat(MAX)],
    ['<MAX+1 x>', 'x'.repeat(MAX + 1)],
    ['<MAX é>', 'é'.repeat(Math.floor(MAX / 2))],
    ['<MAX+1 é>', 'é'.repeat(Math.floor(MAX / 2) + 1)],
    ['<MAX emoji>', '😀'.repeat(Math.floor(MAX / 4))],
    ['<MAX+1 emoji>', '😀'.repeat(Math.floor(MAX / 4) + 1)],
    ['<key MAX>', 'k'.repeat(LIMITS.metadataKeyMaxLength)],
    ['<key MAX+1>', 'k'.repeat(LIMITS.metadataKeyMaxLength + 1)],
  ]);
  const long = (v: unknown): unknown =>
    typeof v === 'string' ? (LONG.get(v) ?? v) : Array.isArray(v) ? v.map(long) : v;
  const key = fc.oneof(
    fc.constantFrom(
      'constructor',
      'toString',
      'hasOwnProperty',
      '__proto__',
      'valueOf',
      'prototype',
      'text',
      'image_url',
      'service_created_at',
      '',
      '<key MAX>',
      '<key MAX+1>',
      'a.b',
      '$ref',
      'x y',
    ),
    fc.string({ minLength: 1, maxLength: 12 }),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }),
    lone,
  );
  const text = fc.oneof(
    fc.string({ maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 8 }),
    lone,
    fc.constantFrom(...[...LONG.keys()].filter((k) => !k.startsWith('<key'))),
  );
  const number = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
  const scalar = fc.oneof(text, number, fc.boolean());
  const value = fc.oneof(
    { weight: 6, arbitrary: scalar },
    { weight: 2, arbitrary: fc.array(text, { maxLength: 4 }) },
    { weight: 2, arbitrary: fc.array(number, { maxLength: 4 }) },
    fc.array(scalar, { minLength: 2, maxLength: 3 }),
    fc.constant(null),
    fc.record({ a: scalar }),
  );
  const entries = fc.uniqueArray(fc.tuple(key, value), {
    minLength: 1,
    maxLength: 3,
    selector: ([k]) => k,
  });

  let n = 0;
  const stored = async (id: string) =>
    (
      await gql(
        t.url,
        StoredItemDocument,
        { organisation: 'props', dataset: 'meta', id },
        meta.orgToken,
      )
    ).data?.organisation.dataset.item;

  it('never answers 5xx; a valid item reads back equal, an invalid one is named by item and field', async () => {
    await fc.assert(
      fc.asyncProperty(entries, fc.boolean(), fc.nat(1), async (kv, viaGraphql, at) => {
        n++;
        // Object.fromEntries defines own keys: `__proto__` is sent as a key like any other
        const metadata = Object.fromEntries(kv.map(([k, v]) => [long(k), long(v)]));
        const sent = JSON.parse(JSON.stringify(metadata)) as Record<string, unknown>;
        const id = `p-${n}`;
        const filler = { id: `f-${n}`, url: `${img.url}/img/${n}.png`, metadata: { ok: 1 } };
        const item = { id, url: `${img.url}/img/${n}.png`, metadata };
        const items = at === 0 ? [item, filler] : [filler, item];
        const bad = Object.keys(sent).filter((k) => !valid(k, sent[k]));
        let status: number;
        let details: unknown;
        if (viaGraphql) {
          const r = await gql(
            t.url,
            AddContentDocument,
            { organisation: 'props', dataset: 'meta', items: items as never },
            meta.orgToken,
          );
          status = r.errors ? r.errors[0]!.extensions.status : r.httpStatus;
          details = r.errors?.[0]?.extensions.details;
        } else {
          const r = await t.call('POST', `${meta.base}/content`, {
            token: meta.orgToken,
            body: { content: items },
          });
          status = r.status;
          details = r.body.error?.details;
        }
        const what = { viaGraphql, sent: JSON.stringify(sent).slice(0, 300), bad, details };
        expect([what, status]).toEqual([what, bad.length ? 400 : viaGraphql ? 200 : 202]);
        if (bad.length) {
          expect(details).toEqual(
            bad.map((k) => expect.objectContaining({ index: at, id, field: `metadata.${k}` })),
          );
          expect(await stored(id)).toBeNull();
          expect(await stored(filler.id)).toBeNull();
        } else {
          expect([what, (await stored(id))?.metadata]).toEqual([what, sent]);
        }
      }),
      {
        numRuns: 50,
        // Run first, so what must hold always is tried on every run: every internal name as a
        // key through both transports, problems named together whichever rule finds them, and
        // strings at the byte limit whatever their characters.
        examples: [
          [
            [
              ['__proto__', 'p'],
              ['constructor', 'c'],
              ['toString', 1],
            ],
            false,
            1,
          ],
          [
            [
              ['hasOwnProperty', true],
              ['valueOf', ['a']],
              ['__proto__', [2, 3]],
            ],
            true,
            0,
          ],
          [
            [
              ['__proto__', null],
              ['image_url', 'x'],
              ['constructor', { a: 1 }],
            ],
            false,
            0,
          ],
          [
            [
              ['__proto__', null],
              ['image_url', 'x'],
              ['constructor', { a: 1 }],
            ],
            true,
            1,
          ],
          [
            [
              ['a', '<MAX é>'],
              ['b', ['<MAX emoji>', '<MAX x>']],
            ],
            false,
            0,
          ],
          [
            [
              ['a', '<MAX+1 é>'],
              ['b', ['<MAX+1 x>']],
              ['c', '<MAX+1 emoji>'],
            ],
            true,
            1,
          ],
        ] as never,
      },
    );
  }, 120_000);
});

describe('keys and values named like object internals, written and then queried', () => {
  const KEYS = ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf'];
  // Object.fromEntries defines own keys, so `__proto__` is a key like the others.
  const internalMd = (i: number): Record<string, unknown> =>
    Object.fromEntries([
      ['constructor', ['toString', 'x'][i % 2]],
      ['toString', i],
      ['hasOwnProperty', i % 2 === 0],
      ['__proto__', ['__proto__', 'valueOf', 'constructor'][i % 3]],
      ['valueOf', i % 2 ? ['constructor', '__proto__'] : ['hasOwnProperty']],
    ]);
  const K = Array.from({ length: 6 }, (_, i) => ({
    id: `k-${i}`,
    metadata: internalMd(i),
  }));
  const kIds = (pred: (i: number) => boolean) => K.filter((_, i) => pred(i)).map((k) => k.id);
  const N = docs.length + K.length;

  beforeAll(async () => {
    // k-0 and k-3 get their `__proto__` from an update, which merges it into what they hold
    const content = K.map((k, i) => ({
      id: k.id,
      url: `${img.url}/img/${300 + i}.png`,
      metadata: Object.fromEntries(
        Object.entries(k.metadata).filter(([key]) => i % 3 !== 0 || key !== '__proto__'),
      ),
    }));
    const rest = await t.call('POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content: content.slice(0, 3) },
    });
    expect(rest.status).toBe(202);
    const g = await gql(
      t.url,
      AddContentDocument,
      { organisation: 'acme', dataset: 'shoes', items: content.slice(3) as never },
      ds.orgToken,
    );
    expect(g.errors).toBeUndefined();
    const patch = Object.fromEntries([['__proto__', '__proto__']]);
    const put = await t.call('PUT', `${ds.base}/content`, {
      token: ds.orgToken,
      body: { content: [{ id: 'k-0', metadata: patch }] },
    });
    expect(put.status).toBe(202);
    const u = await gql(
      t.url,
      UpdateContentDocument,
      { organisation: 'acme', dataset: 'shoes', items: [{ id: 'k-3', metadata: patch }] },
      ds.orgToken,
    );
    expect(u.errors).toBeUndefined();
    await t.call('PUT', `${ds.base}/settings/fields`, {
      token: ds.orgToken,
      body: { fields: { sizes: ['s', 'm'], valueOf: ['*'] } },
    });
    await waitProcessed(t, ds.base, ds.orgToken, N);
  }, 120_000);

  it('are stored as sent, by either transport, and merged by updates', async () => {
    for (const k of K) {
      const s = await gql(
        t.url,
        StoredItemDocument,
        { organisation: 'acme', dataset: 'shoes', id: k.id },
        ds.orgToken,
      );
      expect([k.id, s.data?.organisation.dataset.item?.metadata]).toEqual([k.id, k.metadata]);
    }
    const details = await t.call(
      'GET',
      `${ds.base}/content/details?ids=k-0,k-3&fields=${KEYS.join(',')}`,
      {
        token: ds.dsToken,
      },
    );
    expect(details.body.results.map((r: { metadata: object }) => r.metadata)).toEqual([
      K[0]!.metadata,
      K[3]!.metadata,
    ]);
  });

  it.each([
    ['constructor:toString', kIds((i) => i % 2 === 0)],
    ['constructor:!toString', [...kIds((i) => i % 2 === 1), ...docs.map((d) => d.id)]],
    ['toString:1:3', kIds((i) => i >= 1 && i <= 3)],
    ['hasOwnProperty:true', kIds((i) => i % 2 === 0)],
    ['__proto__:__proto__', kIds((i) => i % 3 === 0)],
    ['__proto__:valueOf|constructor', kIds((i) => i % 3 !== 0)],
    ['valueOf:constructor', kIds((i) => i % 2 === 1)],
    ['valueOf:hasOwnProperty,__proto__:constructor', kIds((i) => i === 2)],
    ['text:toString', kIds((i) => i % 2 === 0)],
  ])('q=%s matches the items holding it', async (q, expected) => {
    const got = await allIds(
      `q=${encodeURIComponent(q).replace(/%2C/g, ',').replace(/%3A/g, ':')}`,
    );
    expect(got.ids.sort()).toEqual(expected.sort());
    expect(got.total).toBe(expected.length);
  });

  it('sort by them, numbers and strings, missing last', async () => {
    const rest = docs.map((d) => d.id).sort();
    expect((await allIds('sort=toString&order=desc')).ids).toEqual([
      ...kIds(() => true).reverse(),
      ...rest,
    ]);
    // '__proto__' < 'constructor' < 'valueOf' in code-point order; ties by id
    expect((await allIds('sort=__proto__&order=asc')).ids).toEqual([
      'k-0',
      'k-3',
      'k-2',
      'k-5',
      'k-1',
      'k-4',
      ...rest,
    ]);
  });

  it('project them with fields', async () => {
    const r = await search(
      `q=toString:0:5&fields=${KEYS.join(',')}&sort=toString&order=asc&limit=6`,
    );
    expect(r.body.results.map((x: { metadata: object }) => x.metadata)).toEqual(
      K.map((k) => k.metadata),
    );
  });

  it('count them in facets, stats and content/fields', async () => {
    const r = await search(
      'limit=0&facets=constructor,__proto__,hasOwnProperty,valueOf&stats=toString&histogram=toString:2',
    );
    expect(r.status).toBe(200);
    const facet = (buckets: Array<[string, number]>) => ({
      buckets: buckets.map(([value, count]) => ({ value, count })),
      other: 0,
      missing: docs.length,
    });
    expect(r.body.facets).toEqual(
      Object.fromEntries([
        [
          'constructor',
          facet([
            ['toString', 3],
            ['x', 3],
          ]),
        ],
        [
          '__proto__',
          facet([
            ['__proto__', 2],
            ['constructor', 2],
            ['valueOf', 2],
          ]),
        ],
        [
          'hasOwnProperty',
          facet([
            ['false', 3],
            ['true', 3],
          ]),
        ],
        [
          'valueOf',
          facet([
            ['__proto__', 3],
            ['constructor', 3],
            ['hasOwnProperty', 3],
          ]),
        ],
      ]),
    );
    expect(r.body.stats).toEqual({ toString: { count: 6, min: 0, max: 5, avg: 2.5, sum: 15 } });
    expect(r.body.histograms).toEqual({
      toString: [0, 2, 4].map((from) => ({ from, to: from + 2, count: 2 })),
    });
    const counts = await t.call(
      'GET',
      `${ds.base}/content/fields?fields=constructor,__proto__,valueOf&q=toString:0:5`,
      { token: ds.dsToken },
    );
    expect(counts.body.fields).toEqual(
      Object.fromEntries([
        ['constructor', { toString: 3, x: 3 }],
        [
          '__proto__',
          Object.fromEntries([
            ['__proto__', 2],
            ['constructor', 2],
            ['valueOf', 2],
          ]),
        ],
        [
          'valueOf',
          Object.fromEntries([
            ['__proto__', 3],
            ['constructor', 3],
            ['hasOwnProperty', 3],
          ]),
        ],
      ]),
    );
    const names = await t.call('GET', `${ds.base}/content/fields?fields=*`, { token: ds.dsToken });
    expect(names.body.fields).toEqual(expect.arrayContaining(KEYS));
  });
});
