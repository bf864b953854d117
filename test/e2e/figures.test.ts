/**
 * Contract §10 on whichever engine the project runs (embedded, or Elasticsearch + RabbitMQ):
 * every figure is compared with a brute-force computation over the fixtures, for fixed cases
 * and for random `q` + analytics parameters (fast-check).
 */
import fc from 'fast-check';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';
import { cmpText, holds, qOf, valuesOf, type Cond, type Md } from '../helpers/q-model';
import { SearchFiguresDocument } from '../graphql/generated';

const COLORS = ['red', 'blue', 'green', 'black', 'white', 'Ärger', 'zeta'];
const N = 210;
const docs: Array<{ id: string; md: Md }> = Array.from({ length: N }, (_, i) => {
  const md: Md = {
    tags: [...new Set([`t${i % 4}`, `t${(i * 3) % 5}`])],
    instock: i % 17 === 0 ? 'true' : i % 2 === 0,
    mixed: i % 5 === 0 ? 7 : 'seven',
    labels: [`l${i % 3}`], // an array field never enabled
  };
  if (i % 11 !== 0) md.color = COLORS[i % 7]!;
  if (i % 13 !== 0) md.size = ((i * 7) % 50) + (i % 3 === 0 ? 0.5 : 0);
  return { id: `a-${String(i).padStart(3, '0')}`, md };
});

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t);
  await t.call('PUT', `${ds.base}/settings/fields`, {
    token: ds.orgToken,
    body: { fields: { tags: ['*'] } },
  });
  const content = docs.map((d, i) => ({
    id: d.id,
    url: `${img.url}/img/${i}.png`,
    metadata: d.md,
    // never counted: a privateMetadata key behaves like a field no item has (contract §6)
    privateMetadata: { color: 'vault', secret: i },
  }));
  const r = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(r.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
}, 180_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

const search = (qs: string) => t.call('GET', `${ds.base}/search?${qs}`, { token: ds.dsToken });

function modelFacet(cs: Cond[], field: string, size: number, disjunctive: boolean) {
  const used = disjunctive ? cs.filter((c) => c.field !== field) : cs;
  const hits = docs.filter((d) => used.every((c) => holds(d.md, c)));
  const counts = new Map<string, { num?: number; text: string; count: number }>();
  let missing = 0;
  for (const d of hits) {
    const vs = valuesOf(d.md, field);
    if (!vs.length) missing++;
    for (const v of vs) {
      const key = `${typeof v === 'number' ? 'n' : 't'}:${String(v)}`;
      const e = counts.get(key) ?? {
        ...(typeof v === 'number' ? { num: v } : {}),
        text: String(v),
        count: 0,
      };
      e.count++;
      counts.set(key, e);
    }
  }
  const all = [...counts.values()].sort(
    (a, b) =>
      b.count - a.count ||
      (a.num !== undefined && b.num !== undefined
        ? a.num - b.num
        : a.num !== undefined
          ? -1
          : b.num !== undefined
            ? 1
            : cmpText(a.text, b.text)),
  );
  const listed = all.slice(0, size);
  return {
    buckets: listed.map((v) => ({ value: v.text, count: v.count })),
    other: all.slice(size).reduce((s, v) => s + v.count, 0),
    missing,
  };
}

function modelNumbers(cs: Cond[], field: string): number[] {
  return docs
    .filter((d) => cs.every((c) => holds(d.md, c)))
    .flatMap((d) => valuesOf(d.md, field).filter((v): v is number => typeof v === 'number'));
}

function modelStats(cs: Cond[], field: string) {
  const ns = modelNumbers(cs, field);
  if (!ns.length) return { count: 0, min: null, max: null, avg: null, sum: 0 };
  const sum = ns.reduce((s, n) => s + n, 0);
  return {
    count: ns.length,
    min: Math.min(...ns),
    max: Math.max(...ns),
    avg: sum / ns.length,
    sum,
  };
}

function modelHistogram(cs: Cond[], field: string, interval: number) {
  const ns = modelNumbers(cs, field);
  if (!ns.length) return [];
  const first = Math.floor(Math.min(...ns) / interval);
  const last = Math.floor(Math.max(...ns) / interval);
  const out = [];
  for (let k = first; k <= last; k++)
    out.push({
      from: k * interval,
      to: (k + 1) * interval,
      count: ns.filter((n) => Math.floor(n / interval) === k).length,
    });
  return out;
}

describe('search analytics (contract §10)', () => {
  test('facets, stats and histograms over every match, not the page', async () => {
    const cs: Cond[] = [{ kind: 'not', field: 'color', values: ['black'] }];
    const r = await search(
      `q=${qOf(cs)}&limit=2&facets=color,tags,instock,mixed,size,nothing&facet_size=3&stats=size,color&histogram=size:10`,
    );
    expect(r.status).toBe(200);
    expect(r.body.results).toHaveLength(2);
    for (const f of ['color', 'tags', 'instock', 'mixed', 'size', 'nothing'])
      expect([f, r.body.facets[f]]).toEqual([f, modelFacet(cs, f, 3, false)]);
    // a field no item has: no buckets, every match missing
    expect(r.body.facets.nothing.missing).toBe(r.body.total_results);
    // strings and booleans with the same text are one value ("true")
    expect(r.body.facets.instock.buckets.map((b: { value: string }) => b.value)).toContain('true');
    expect(r.body.stats).toEqual({ size: modelStats(cs, 'size'), color: modelStats(cs, 'color') });
    expect(r.body.stats.color).toEqual({ count: 0, min: null, max: null, avg: null, sum: 0 });
    expect(r.body.histograms).toEqual({ size: modelHistogram(cs, 'size', 10) });
  });

  test('disjunctive counts ignore the conditions on their own field only', async () => {
    const cs: Cond[] = [
      { kind: 'eq', field: 'color', values: ['red', 'blue'] },
      { kind: 'range', field: 'size', gte: 5, lte: 40 },
    ];
    const r = await search(
      `q=${qOf(cs)}&limit=0&facets=color,size&disjunctive=color&facet_size=20`,
    );
    expect(r.status).toBe(200);
    expect(r.body.results).toEqual([]);
    expect(r.body.facets.color).toEqual(modelFacet(cs, 'color', 20, true));
    expect(r.body.facets.color.buckets.length).toBeGreaterThan(2); // the alternatives show
    expect(r.body.facets.size).toEqual(modelFacet(cs, 'size', 20, false));
  });

  test('privateMetadata is never counted', async () => {
    const r = await search('limit=0&facets=color,secret&stats=secret');
    expect(r.body.facets.color.buckets.map((b: { value: string }) => b.value)).not.toContain(
      'vault',
    );
    expect(r.body.facets.secret).toEqual({ buckets: [], other: 0, missing: N });
    expect(r.body.stats.secret.count).toBe(0);
  });

  test('histogram and disjunctive on a privateMetadata key answer exactly as on a key no item has', async () => {
    // `secret` is private only (0…209 on every item); `nothing` is on no item at all
    const figures = (k: string) => [
      `limit=0&histogram=${k}:10`,
      `limit=0&histogram=${k}:1,size:10&q=color:red`,
      `limit=0&facets=color,${k}&disjunctive=${k}&q=${k}:3:9`,
      `limit=0&facets=${k},color&disjunctive=${k}&q=color:red,${k}:!4`,
      `limit=2&facets=${k}&disjunctive=${k}&stats=${k}&histogram=${k}:5&q=size:0:50&sort=size`,
    ];
    const rename = (body: unknown, k: string) =>
      JSON.parse(JSON.stringify(body).replaceAll(`"${k}"`, '"KEY"')) as Record<string, unknown>;
    const priv = figures('secret');
    const none = figures('nothing');
    for (const [i, qs] of priv.entries()) {
      const [p, n] = [await search(qs), await search(none[i]!)];
      expect([qs, p.status]).toEqual([qs, 200]);
      expect([qs, rename(p.body, 'secret')]).toEqual([qs, rename(n.body, 'nothing')]);
    }
    // what a key no item has answers: no buckets, every match missing
    const h = await search('limit=0&histogram=secret:10');
    expect(h.body.histograms).toEqual({ secret: [] });
    const d = await search('limit=0&facets=secret&disjunctive=secret&q=secret:3:9');
    expect(d.body.total_results).toBe(0);
    expect(d.body.facets.secret).toEqual({ buckets: [], other: 0, missing: N });
  });

  test('time histograms: UTC buckets with ISO bounds, empty ones included', async () => {
    const r = await search('limit=0&histogram=service_created_at:hour,service_updated_at:month');
    expect(r.status).toBe(200);
    const hours = r.body.histograms.service_created_at as Array<{
      from: string;
      to: string;
      count: number;
    }>;
    expect(hours.reduce((s, b) => s + b.count, 0)).toBe(N);
    for (const b of hours) {
      expect(new Date(b.from).getUTCMinutes()).toBe(0);
      expect(Date.parse(b.to) - Date.parse(b.from)).toBe(3_600_000);
    }
    const months = r.body.histograms.service_updated_at as Array<{ from: string; count: number }>;
    expect(months[0]!.from).toMatch(/^\d{4}-\d{2}-01T00:00:00\.000Z$/);
  });

  test('bad parameters are 400s naming the parameter', async () => {
    const cases: Array<[string, string]> = [
      ['facets=color&facet_size=0', 'facet_size'],
      ['facets=color&facet_size=1001', 'facet_size'],
      ['facets=color&disjunctive=size', 'disjunctive'],
      ['stats=service_created_at', 'stats'],
      ['histogram=size', 'histogram'],
      ['histogram=size:0', 'histogram'],
      ['histogram=size:-5', 'histogram'],
      ['histogram=service_created_at:fortnight', 'histogram'],
      ['histogram=size:0.01', 'histogram'], // more than 1000 buckets
      ['facets=color,', 'facets'],
      ['limit=0', 'limit'], // limit=0 only with figures
    ];
    for (const [qs, param] of cases) {
      const r = await search(qs);
      expect([qs, r.status, r.body.error?.details?.[0]?.param]).toEqual([qs, 400, param]);
    }
  });

  test('array fields follow the q rule: enabled to be counted, with "*" for numbers', async () => {
    const refused = await search('limit=0&facets=labels');
    expect([refused.status, refused.body.error.details[0].param]).toEqual([400, 'facets']);
    expect(refused.body.error.message).toContain('labels');
    const ok = await search('limit=0&facets=tags&stats=tags');
    expect(ok.status).toBe(200);
    expect(ok.body.facets.tags).toEqual(modelFacet([], 'tags', 10, false));
  });

  test('property: random q and analytics parameters equal the brute-force figures', async () => {
    const field = fc.constantFrom('color', 'size', 'instock', 'mixed', 'tags');
    const cond: fc.Arbitrary<Cond> = fc.oneof(
      fc.record({
        kind: fc.constantFrom('eq' as const, 'not' as const),
        field: fc.constantFrom('color', 'instock', 'mixed'),
        values: fc.subarray([...COLORS, 'true', 'false', '7', 'seven'], {
          minLength: 1,
          maxLength: 3,
        }),
      }),
      fc.tuple(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 50 })).map(([a, b]) => ({
        kind: 'range' as const,
        field: 'size',
        gte: Math.min(a, b),
        lte: Math.max(a, b),
      })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(cond, { maxLength: 2, selector: (c) => c.field }),
        fc.uniqueArray(field, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 1, max: 8 }),
        fc.boolean(),
        fc.constantFrom(1, 2.5, 10),
        async (cs, facets, size, disj, interval) => {
          const disjunctive = disj ? facets[0]! : undefined;
          const qs =
            `limit=0&facets=${facets.join(',')}&facet_size=${size}` +
            (cs.length ? `&q=${qOf(cs)}` : '') +
            (disjunctive ? `&disjunctive=${disjunctive}` : '') +
            `&stats=size&histogram=size:${interval}`;
          const r = await search(qs);
          expect([qs, r.status]).toEqual([qs, 200]);
          for (const f of facets)
            expect([qs, f, r.body.facets[f]]).toEqual([
              qs,
              f,
              modelFacet(cs, f, size, f === disjunctive),
            ]);
          expect([qs, r.body.stats.size]).toEqual([qs, modelStats(cs, 'size')]);
          expect([qs, r.body.histograms.size]).toEqual([qs, modelHistogram(cs, 'size', interval)]);
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000);

  test('GraphQL: typed facets, stats and histograms equal the REST figures', async () => {
    const q = 'color:!black,size:5:45';
    const rest = await search(
      `q=${q}&limit=0&facets=color,tags&disjunctive=color&facet_size=4&stats=size&histogram=size:10,service_created_at:day`,
    );
    const r = await gql(
      t.url,
      SearchFiguresDocument,
      {
        organisation: 'acme',
        dataset: 'shoes',
        q,
        limit: 0,
        facets: [
          { field: 'color', disjunctive: true },
          { field: 'tags', disjunctive: false },
        ],
        facetSize: 4,
        stats: ['size'],
        histograms: [
          { field: 'size', interval: 10 },
          { field: 'service_created_at', calendar: 'DAY' },
        ],
      },
      ds.dsToken,
    );
    expect(r.errors).toBeUndefined();
    const s = r.data!.vision.search;
    expect(s.totalResults).toBe(rest.body.total_results);
    expect(s.results).toEqual([]);
    expect(Object.fromEntries(s.facets!.map(({ field, ...f }) => [field, f]))).toEqual(
      rest.body.facets,
    );
    expect(Object.fromEntries(s.stats!.map(({ field, ...f }) => [field, f]))).toEqual(
      rest.body.stats,
    );
    const [size, created] = s.histograms!;
    expect(size!.buckets.map(({ from, to, count }) => ({ from, to, count }))).toEqual(
      rest.body.histograms.size,
    );
    expect(
      created!.buckets.map((b) => ({ from: b.fromTime, to: b.toTime, count: b.count })),
    ).toEqual(rest.body.histograms.service_created_at);

    const bad = await gql(
      t.url,
      SearchFiguresDocument,
      { organisation: 'acme', dataset: 'shoes', histograms: [{ field: 'size' }] },
      ds.dsToken,
    );
    expect(onlyError(bad).extensions).toMatchObject({ code: 'invalid_request', status: 400 });
    const tooBig = await gql(
      t.url,
      SearchFiguresDocument,
      { organisation: 'acme', dataset: 'shoes', facets: [{ field: 'color' }], facetSize: 0 },
      ds.dsToken,
    );
    expect(onlyError(tooBig).extensions.details?.[0]).toMatchObject({ param: 'facet_size' });
  });
});

describe('track (contract §11)', () => {
  const track = (qs: string, body?: unknown) =>
    t.call('POST', `${ds.base}/track${qs}`, {
      token: ds.dsToken,
      ...(body === undefined ? {} : { body }),
    });

  test('events go to the dataset event log with their v, 202, never billed', async () => {
    const usage = async () => {
      await t.chargesRecorded();
      return (await t.call('GET', '/orgs/acme/usage', { token: ds.orgToken })).body.usage;
    };
    const before = await usage();
    const one = await track('?v=a:click,id:a-001,page_view_id:pv1');
    expect([one.status, one.body]).toEqual([202, { status: 'accepted' }]);
    const batch = await track('', {
      events: [
        { v: 'a:add_to_cart,id:a-002', timestamp: '2026-11-20T10:00:00Z' },
        { v: 'a:click,id:a-003,page_view_id:pv1' },
      ],
    });
    expect(batch.status).toBe(202);
    const dataset = await t.app.container.ports.accounts.getDataset('acme', 'shoes');
    const logged = await waitFor('three track events in the log', async () => {
      const all = await t.app.container.ports.events.list(
        dataset!.id,
        { from: 0, to: Date.now() + 60_000 },
        1000,
      );
      const tracked = all.filter((e) => e.kind === 'track');
      return tracked.length >= 3 && tracked;
    });
    expect(logged.map((e) => [e.type, e.vars?.id])).toEqual(
      expect.arrayContaining([
        ['click', 'a-001'],
        ['add_to_cart', 'a-002'],
        ['click', 'a-003'],
      ]),
    );
    expect(logged.find((e) => e.vars?.id === 'a-002')!.at).toBe(Date.parse('2026-11-20T10:00:00Z'));
    expect(await usage()).toEqual(before);
  });

  test('a bad event is a 400 naming it, and nothing of the request is recorded', async () => {
    const cases: Array<[string, unknown, Record<string, unknown>]> = [
      ['', undefined, { param: 'v' }],
      ['?v=id:a-001', undefined, { param: 'v' }], // no a:<action>
      ['?v=a:click,bad', undefined, { param: 'v' }],
      ['', { events: [{ v: 'a:click' }, { v: 'id:x' }] }, { index: 1 }],
      ['', { events: [{ v: 'a:click', timestamp: 'yesterday' }] }, { index: 0 }],
      ['', { events: 'a:click' }, { field: 'events' }],
      ['', { events: Array.from({ length: 1001 }, () => ({ v: 'a:view' })) }, { field: 'events' }],
    ];
    const dataset = await t.app.container.ports.accounts.getDataset('acme', 'shoes');
    const tracked = async () =>
      (
        await t.app.container.ports.events.list(
          dataset!.id,
          { from: 0, to: Date.now() + 60_000 },
          10_000,
        )
      ).filter((e) => e.kind === 'track');
    const apiHosts = t.hosts.filter((h) => h.url).length;
    /**
     * Tracks a marker through every API host and waits until the log shows them: whatever any
     * host appended before is visible by then (a host writes its appends in order, and the
     * event log, one shard in the tests' layout, is made visible whole).
     */
    const mark = async (name: string) => {
      for (let h = 0; h < apiHosts; h++) {
        const r = await t.callOn(h, 'POST', `${ds.base}/track?v=a:mark,id:${name}-${h}`, {
          token: ds.dsToken,
        });
        expect(r.status).toBe(202);
      }
      return waitFor(`the ${name} marks in the event log`, async () => {
        const all = await tracked();
        const marks = all.filter((e) => e.type === 'mark' && e.vars?.id?.startsWith(`${name}-`));
        return marks.length === apiHosts && all;
      });
    };
    // ties in `at` may be listed in either order
    const asSet = (events: unknown[]) => events.map((e) => JSON.stringify(e)).sort();
    const before = await mark('before');
    for (const [qs, body, detail] of cases) {
      const r = await track(qs, body);
      expect([qs, r.status, r.body.error?.details?.[0]]).toEqual([
        qs,
        400,
        expect.objectContaining(detail),
      ]);
    }
    const after = await mark('after');
    // nothing but the marks was added: the good first event of a bad batch neither
    expect(
      asSet(after.filter((e) => !(e.type === 'mark' && e.vars?.id?.startsWith('after-')))),
    ).toEqual(asSet(before));
  });
});

describe('GraphQL typed filter', () => {
  const total = async (filter: unknown) => {
    const r = await gql<{ vision: { search: { totalResults: number } } }, object>(
      t.url,
      `query($f: FilterInput) { vision(organisation: "acme", dataset: "shoes") {
         search(filter: $f, limit: 2) { totalResults } } }`,
      { f: filter },
      ds.dsToken,
    );
    return r;
  };
  const count = (pred: (md: Md) => boolean) => docs.filter((d) => pred(d.md)).length;
  const color = (md: Md) => md.color as string | undefined;
  const size = (md: Md) => md.size as number | undefined;

  test('per-field tests with and / or / not select what the model selects', async () => {
    const cases: Array<[unknown, (md: Md) => boolean]> = [
      [
        {
          where: { field: 'color', in: ['red', 'blue'] },
          and: [{ where: { field: 'size', range: { gte: 5, lte: 40 } } }],
        },
        (md) =>
          ['red', 'blue'].includes(color(md) ?? '') && (size(md) ?? -1) >= 5 && size(md)! <= 40,
      ],
      [
        {
          or: [
            { where: { field: 'color', eq: 'red' } },
            { where: { field: 'size', range: { lte: 3 } } },
          ],
        },
        (md) => color(md) === 'red' || (size(md) !== undefined && size(md)! <= 3),
      ],
      [{ not: { where: { field: 'color', eq: 'red' } } }, (md) => color(md) !== 'red'],
      [{ where: { field: 'color', exists: false } }, (md) => color(md) === undefined],
      [
        { where: { field: 'color', not: ['red', 'zeta'] } },
        (md) => !['red', 'zeta'].includes(color(md) ?? ''),
      ],
      [{ where: { field: 'tags', eq: 't1' } }, (md) => (md.tags as string[]).includes('t1')],
      [{ where: { field: 'mixed', eq: '7' } }, (md) => md.mixed === 7],
      [{ or: [] }, () => false],
    ];
    for (const [filter, pred] of cases) {
      const r = await total(filter);
      expect([filter, r.errors, r.data?.vision.search.totalResults]).toEqual([
        filter,
        undefined,
        count(pred),
      ]);
    }
    // the same selection as the equivalent q
    const q = await search('q=color:red|blue,size:5:40&limit=2');
    expect((await total(cases[0]![0])).data!.vision.search.totalResults).toBe(q.body.total_results);
  });

  test('the dataset rules of q apply, named for the filter', async () => {
    const e = onlyError(await total({ where: { field: 'labels', eq: 'l1' } }));
    expect(e.extensions).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(e.extensions.details?.[0]).toMatchObject({ param: 'filter', field: 'labels' });
    const empty = onlyError(await total({ where: { field: 'color' } }));
    expect(empty.extensions.details?.[0]).toMatchObject({ param: 'filter' });
  });
});
