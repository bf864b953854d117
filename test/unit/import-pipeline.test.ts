import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runImport, type ImportOptions } from '../../src/cli/import/importer';
import { createProgress } from '../../src/cli/import/progress';

/**
 * The pipeline against a fake server (a fetch function): 413 splitting, 400 details, the
 * all-or-nothing batch, ordering of acknowledgements under concurrency.
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-import-pipe-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Fake {
  fetch: typeof fetch;
  stored: Set<string>;
  requests: number;
}

/** Refuses bodies over `maxBody` (413) and items whose id ends in "bad" (400, all or nothing). */
function fakeServer(maxBody: number, opts: { noDetails?: boolean } = {}): Fake {
  const fake: Fake = { stored: new Set(), requests: 0, fetch: undefined as never };
  fake.fetch = (async (_url: string, init: RequestInit) => {
    fake.requests++;
    await new Promise((r) => setTimeout(r, Math.random() * 5)); // answers out of order
    const body = String(init.body);
    const json = (status: number, b: unknown) =>
      new Response(JSON.stringify(b), { status, headers: { 'content-type': 'application/json' } });
    if (Buffer.byteLength(body) > maxBody)
      return json(413, { status: 'error', error: { code: 'payload_too_large', message: 'big' } });
    const items = JSON.parse(body).content as Array<{ id: string }>;
    const details = items.flatMap((it, index) =>
      it.id.endsWith('bad') ? [{ index, id: it.id, field: 'metadata.x', message: 'refused' }] : [],
    );
    if (details.length)
      return json(400, {
        status: 'error',
        error: { code: 'invalid_request', message: 'no', ...(opts.noDetails ? {} : { details }) },
      });
    for (const it of items) fake.stored.add(it.id);
    return json(202, { status: 'accepted' });
  }) as typeof fetch;
  return fake;
}

function options(file: string, fake: Fake, over: Partial<ImportOptions> = {}): ImportOptions {
  return {
    file,
    org: 'acme',
    dataset: 'shoes',
    baseUrl: 'http://fake',
    token: 't',
    types: new Map(),
    statePath: `${file}.state`,
    rejectedPath: `${file}.rejected`,
    restart: false,
    concurrency: 3,
    limits: { maxBytes: 100_000, maxItems: 10 },
    progress: createProgress(process.stderr, { quiet: true }),
    fetch: fake.fetch,
    ...over,
  };
}

it('splits what the server finds too large, drops what it refuses, acknowledges in order', async () => {
  const file = path.join(dir, 'a.jsonl');
  const ids = Array.from({ length: 200 }, (_, i) => (i % 23 === 5 ? `i${i}-bad` : `i${i}`));
  fs.writeFileSync(
    file,
    ids.map((id) => JSON.stringify({ id, url: 'http://x/1.png', pad: 'x'.repeat(100) })).join('\n'),
  );
  const fake = fakeServer(700); // about four items per body: batches of ten are split
  const r = await runImport(options(file, fake));
  expect(r.complete).toBe(true);
  expect(r.fatal).toBeUndefined();
  const bad = ids.filter((id) => id.endsWith('bad'));
  expect([...fake.stored].sort()).toEqual(ids.filter((id) => !id.endsWith('bad')).sort());
  expect(r.state).toMatchObject({ accepted: 200 - bad.length, rejected: bad.length, done: true });
  const rejected = fs
    .readFileSync(`${file}.rejected`, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  expect(rejected.map((x) => x.id)).toEqual(bad);
  expect(rejected[0]).toEqual({
    line: 6,
    id: 'i5-bad',
    field: 'metadata.x',
    reason: 'refused',
    by: 'server',
  });
  expect(r.state.offset).toBe(fs.statSync(file).size);
});

it('stops with a clear error when a 400 names no item, keeping what was acknowledged', async () => {
  const file = path.join(dir, 'b.jsonl');
  const lines = Array.from({ length: 50 }, (_, i) =>
    JSON.stringify({ id: i === 30 ? 'x-bad' : `i${i}`, url: 'http://x/1.png' }),
  );
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  const r = await runImport(
    options(file, fakeServer(1e6, { noDetails: true }), { concurrency: 1 }),
  );
  expect(r.complete).toBe(false);
  expect(r.fatal).toMatch(/refused the batch of lines 31–40 without naming an item: no/);
  expect(r.state).toMatchObject({ line: 31, accepted: 30, done: false });
});

it('refuses to resume from the state of another file', async () => {
  const file = path.join(dir, 'c.jsonl');
  fs.writeFileSync(file, '{"id":"1","url":"http://x/1.png"}\n');
  const fake = fakeServer(1e6);
  expect((await runImport(options(file, fake))).complete).toBe(true);
  fs.writeFileSync(file, '{"id":"2","url":"http://x/2.png"}\n');
  await expect(runImport(options(file, fake))).rejects.toThrow(
    /cannot resume .*the input file has changed since; pass --restart/,
  );
  const again = await runImport(options(file, fake, { restart: true }));
  expect(again.state).toMatchObject({ accepted: 1, done: true });
});

it('retries network errors, but stops at once on a url no retry can reach', async () => {
  const file = path.join(dir, 'd.jsonl');
  fs.writeFileSync(file, '{"id":"1","url":"http://x/1.png"}\n');
  const fake = fakeServer(1e6);
  let failures = 2;
  const flaky = (async (url: string, init: RequestInit) => {
    if (failures-- > 0)
      throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } } as ErrorOptions);
    return fake.fetch(url, init);
  }) as typeof fetch;
  const retry = { attempts: 5, baseMs: 10, maxMs: 50, maxRetryAfterMs: 1000 };
  const notes: string[] = [];
  const progress = {
    update: () => undefined,
    stop: () => undefined,
    note: (m: string) => void notes.push(m),
  };
  const r = await runImport(options(file, fake, { fetch: flaky, retry, progress }));
  expect(r.complete).toBe(true);
  expect(fake.stored.has('1')).toBe(true);
  expect(notes).toEqual([
    expect.stringMatching(/network error: fetch failed \(ECONNREFUSED\); retry 1 in/),
    expect.stringMatching(/retry 2 in/),
  ]);

  let tries = 0;
  const badPort = (async () => {
    tries++;
    throw new TypeError('fetch failed', { cause: new Error('bad port') });
  }) as typeof fetch;
  notes.length = 0;
  const stopped = await runImport(
    options(file, fake, { fetch: badPort, retry, progress, restart: true }),
  );
  expect(stopped.fatal).toMatch(/bad port\); check --url/);
  // stopped at once: the one request was not tried again, and no retry was announced
  expect(tries).toBe(1);
  expect(notes).toEqual([]);
});
