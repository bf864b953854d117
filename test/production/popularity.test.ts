/**
 * Contract §14 at scale on Elasticsearch: 10,000 clicks and purchases tracked through two API
 * hosts at once, while the items are written again through both, and rolled up by two workers
 * that may both run a pass. Every item's fields must equal the counts of the events sent (the
 * event log's content) within 60 s; events dated 31 days ago never count; events age out when
 * the installation's clock passes their 30th day.
 */
import { LIMITS } from '../../src/domain/limits';
import { setupDataset, startTestApp, waitFor, waitProcessed, type TestApp } from '../helpers/app';
import { startImageServer, type ImageServer } from '../helpers/image-server';

const N = 200;
const EVENTS = 10_000;
const DAY = 86_400_000;
const ids = Array.from({ length: N }, (_, i) => `q-${String(i).padStart(3, '0')}`);

function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

type Counts = [popularity: number, purchases: number];

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  // two API hosts and two workers, on one Elasticsearch and one RabbitMQ
  expect(t.hosts.filter((h) => h.url)).toHaveLength(2);
  ds = await setupDataset(t);
  const content = ids.map((id, i) => ({ id, url: `${img.url}/img/${i}.png`, metadata: { n: i } }));
  expect(
    (await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } })).status,
  ).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N, 120_000);
}, 180_000);
afterAll(async () => {
  await t.stop();
  await img.close();
});

/** Every item's two fields (and n), read through one host. */
async function fieldsOn(host: number): Promise<Map<string, { counts: Counts; n: number }>> {
  const out = new Map<string, { counts: Counts; n: number }>();
  for (let page = 1; page <= N / 50; page++) {
    const r = await t.callOn(
      host,
      'GET',
      `${ds.base}/search?limit=50&page=${page}&sort=service_created_at&order=asc&fields=n,service_popularity,service_purchases`,
      { token: ds.dsToken },
    );
    expect(r.status).toBe(200);
    for (const e of r.body.results as Array<{ id: string; metadata: Record<string, number> }>)
      out.set(e.id, {
        counts: [e.metadata.service_popularity!, e.metadata.service_purchases!],
        n: e.metadata.n!,
      });
  }
  return out;
}

test('10,000 events through two hosts: every item equals the log within 60 s; aging by the clock', async () => {
  const rand = rng(36);
  const now = t.clock.now();
  const model = new Map<string, Counts>(ids.map((id) => [id, [0, 0]]));
  /** The part of the model that turns 30 days old within the next hour. */
  const aging = new Map<string, Counts>(ids.map((id) => [id, [0, 0]]));
  const events: Array<{ v: string; timestamp: string }> = [];
  for (let i = 0; i < EVENTS; i++) {
    const id = ids[Math.floor(rand() ** 2 * N)]!;
    const purchase = rand() < 0.3;
    const qty = purchase && rand() < 0.7 ? 1 + Math.floor(rand() * 9) : undefined;
    const when = rand();
    // 5 % dated 31 days ago (never count), 5 % within an hour of their 30th day, the rest recent
    const at =
      when < 0.05
        ? now - 31 * DAY
        : when < 0.1
          ? now - LIMITS.popularityWindowMs + 60_000 + Math.floor(rand() * 3_000_000)
          : now - Math.floor(rand() * 29 * DAY);
    events.push({
      v: `a:${purchase ? 'purchase' : 'click'},id:${id}${qty ? `,qty:${qty}` : ''}`,
      timestamp: new Date(at).toISOString(),
    });
    if (when < 0.05) continue;
    for (const m of when < 0.1 ? [model, aging] : [model]) {
      const c = m.get(id)!;
      if (purchase) c[1] += qty ?? 1;
      else c[0]++;
    }
  }
  // Both hosts track at once, while both write every fourth item again (new metadata, same url).
  const tracking = Array.from({ length: EVENTS / 500 }, (_, b) =>
    t.callOn(b % 2, 'POST', `${ds.base}/track`, {
      token: ds.dsToken,
      body: { events: events.slice(b * 500, b * 500 + 500) },
    }),
  );
  const rewrites = [0, 1].map((host) =>
    t.callOn(host, 'POST', `${ds.base}/content`, {
      token: ds.orgToken,
      body: {
        content: ids
          .filter((_, i) => i % 4 === 0 && i % 8 === host * 4)
          .map((id) => ({
            id,
            url: `${img.url}/img/${ids.indexOf(id)}.png`,
            metadata: { n: -ids.indexOf(id) },
          })),
      },
    }),
  );
  for (const r of await Promise.all([...tracking, ...rewrites])) expect(r.status).toBe(202);
  const tracked = Date.now();

  // asked once a second: each look is four searches per host
  const differences = async (want: Map<string, Counts>, host: number): Promise<string[]> => {
    await new Promise((r) => setTimeout(r, 500));
    const got = await fieldsOn(host);
    return ids.filter((id, i) => {
      const g = got.get(id);
      const n = i % 4 === 0 ? -i : i;
      return (
        !g || g.n !== n || g.counts[0] !== want.get(id)![0] || g.counts[1] !== want.get(id)![1]
      );
    });
  };
  let left: string[] = [];
  await waitFor(
    'every item to equal the event log on both hosts',
    async () => {
      left = [...(await differences(model, 0)), ...(await differences(model, 1))];
      return left.length === 0;
    },
    60_000,
  ).catch(() => expect(left).toEqual([]));
  expect(Date.now() - tracked).toBeLessThan(60_000);
  // some events really were old or aging, and counted ones add up to what was sent
  const total = [...model.values()].reduce((s, [p, q]) => s + p + q, 0);
  expect(total).toBeGreaterThan(0);
  expect([...aging.values()].some(([p, q]) => p + q > 0)).toBe(true);

  // An hour later the aging events are more than 30 days old: they stop counting.
  t.clock.advance(3_600_000);
  const later = new Map(
    ids.map((id) => {
      const [p, q] = model.get(id)!;
      const [ap, aq] = aging.get(id)!;
      return [id, [p - ap, q - aq] as Counts];
    }),
  );
  const aged = Date.now();
  await waitFor(
    'aged events to stop counting',
    async () => {
      left = await differences(later, aged % 2);
      return left.length === 0;
    },
    60_000,
  ).catch(() => expect(left).toEqual([]));
}, 240_000);
