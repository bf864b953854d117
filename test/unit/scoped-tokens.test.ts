import crypto from 'node:crypto';
import fc from 'fast-check';
import { mintScoped, parseScoped, scopedKey, verifyScoped } from '../../src/services/scoped-tokens';
import { checkPayload, type ScopePayload } from '../../src/services/scope-payload';
import { AuthService } from '../../src/services/auth';
import type { AccountStore } from '../../src/ports/account-store';
import type { Dataset } from '../../src/domain/dataset';

const serverKey = crypto.randomBytes(32);
const key = scopedKey(serverKey, 'ds-1', 0);

const payload: fc.Arbitrary<ScopePayload> = fc.record(
  {
    q: fc.string({ maxLength: 60 }),
    exp: fc.nat(),
    types: fc.subarray(['search', 'similar', 'explore', 'lens', 'collection'] as const),
    fields: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 5 }),
    rate: fc.integer({ min: 1, max: 100_000 }),
    uid: fc.string({ minLength: 1, maxLength: 100 }),
  },
  { requiredKeys: [] },
);

/** Contract §16 by hand: what a shop's server does, with no code of ours. */
const byHand = (k: string, json: string): string => {
  const p = Buffer.from(json).toString('base64url');
  return `st_${p}.${crypto.createHmac('sha256', k).update(p).digest('base64url')}`;
};

test('a minted token parses to its payload and verifies under its key only', () => {
  fc.assert(
    fc.property(payload, (claims) => {
      const t = parseScoped(mintScoped(key, claims));
      expect(t?.claims).toEqual(claims);
      expect(verifyScoped(t!, key)).toBe(true);
      expect(verifyScoped(t!, scopedKey(serverKey, 'ds-1', 1))).toBe(false);
      expect(verifyScoped(t!, scopedKey(serverKey, 'ds-2', 0))).toBe(false);
      expect(verifyScoped(t!, scopedKey(crypto.randomBytes(32), 'ds-1', 0))).toBe(false);
    }),
  );
});

test('the signature covers the bytes of P as sent, in any key order and spacing', () => {
  const t = parseScoped(byHand(key, '{ "rate": 5,  "q": "brand:acme" }'));
  expect(t?.claims).toEqual({ q: 'brand:acme', rate: 5 });
  expect(verifyScoped(t!, key)).toBe(true);
});

test('any change to P or S fails: parsing or verification', () => {
  const token = mintScoped(key, { q: 'brand:acme', exp: 2_000_000_000 });
  fc.assert(
    fc.property(
      fc.nat({ max: token.length - 4 }),
      fc.constantFrom(...'AQgw-_xyz019'.split('')),
      (i, ch) => {
        const at = i + 3; // past "st_"
        if (token[at] === ch || token[at] === '.') return;
        const changed = token.slice(0, at) + ch + token.slice(at + 1);
        const t = parseScoped(changed);
        expect(t === undefined || !verifyScoped(t, key)).toBe(true);
      },
    ),
  );
});

test('malformed tokens are refused before any key is needed', () => {
  const good = mintScoped(key, { q: 'a:b' });
  const [p, s] = good.slice(3).split('.') as [string, string];
  const std = (x: string) => Buffer.from(x, 'base64url').toString('base64');
  for (const bad of [
    `st_${p}`, // no signature
    `st_${p}.${s}=`, // padding
    `st_${std(p)}.${std(s)}`, // the +/ alphabet with padding
    `st_${p}.${s.slice(0, -1)}`, // short signature
    byHand(key, '[1,2]'), // not an object
    byHand(key, '{"q":"a:b","scope":"all"}'), // an unknown key: refused, never ignored
    byHand(key, '{"rate":0}'),
    byHand(key, '{"types":["search","search"]}'),
    byHand(key, '{"types":["details"]}'),
    byHand(key, '{"exp":"tomorrow"}'),
    byHand(key, 'not json'),
  ])
    expect(parseScoped(bad)).toBeUndefined();
});

test('a non-canonical spelling of P is refused: one payload, one token', () => {
  const p = Buffer.from('{"q":"a:b"}').toString('base64url'); // 11 bytes: last char has spare bits
  const last = p.at(-1)!;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const other = alphabet[alphabet.indexOf(last) + 1]!;
  const alt = p.slice(0, -1) + other;
  expect(Buffer.from(alt, 'base64url').equals(Buffer.from(p, 'base64url'))).toBe(true);
  const signed = `st_${alt}.${crypto.createHmac('sha256', key).update(alt).digest('base64url')}`;
  expect(parseScoped(signed)).toBeUndefined();
});

test('minting checks the payload and names every bad key', () => {
  expect(() => checkPayload({ rate: -1, types: ['search', 'nope'], extra: 1 })).toThrow(
    expect.objectContaining({
      status: 400,
      details: expect.arrayContaining([
        expect.objectContaining({ field: 'rate' }),
        expect.objectContaining({ field: 'types.1' }),
        expect.objectContaining({ field: 'extra' }),
      ]),
    }),
  );
});

describe('AuthService with scoped tokens', () => {
  const ds: Dataset = {
    id: 'ds-1',
    org: 'acme',
    name: 'shoes',
    settings: { fields: {}, version: 1 },
    createdAt: '2026-01-01T00:00:00.000Z',
    browseRotation: 0,
  };
  let rotation = 0;
  const accounts = {
    getDataset: async (org: string, name: string) =>
      org === 'acme' && name === 'shoes' ? { ...ds, browseRotation: rotation } : undefined,
    getDatasetById: async (id: string) =>
      id === ds.id ? { ...ds, browseRotation: rotation } : undefined,
  } as unknown as AccountStore;
  const now = 1_900_000_000_000;
  const auth = new AuthService(accounts, undefined, serverKey, () => now);
  const run = async (token: string, org = 'acme', name = 'shoes') => {
    const p = await auth.authenticate(`token ${token}`);
    return auth.withVisionDataset(p, org, name, async (d) => d.id);
  };
  const code = (e: Promise<unknown>) =>
    e.then(
      () => 'ok',
      (x: { code: string }) => x.code,
    );

  test('verified against the dataset the request names; expiry after the signature', async () => {
    const k = () => auth.scopedKey({ ...ds, browseRotation: rotation });
    expect(await run(mintScoped(k(), { q: 'a:b' }))).toBe('ds-1');
    expect(await code(run(mintScoped(k(), { exp: now / 1000 - 1 })))).toBe('token_expired');
    expect(await code(run(mintScoped(k(), { exp: now / 1000 + 60 })))).toBe('ok');
    // a forged token never learns whether it has expired
    const forged = mintScoped(scopedKey(crypto.randomBytes(32), 'ds-1', 0), { exp: 1 });
    expect(await code(run(forged))).toBe('unauthorized');
    // another dataset, or one that does not exist: the same 401, so names cannot be probed
    expect(await code(run(mintScoped(k(), {}), 'acme', 'boots'))).toBe('unauthorized');
    expect(await code(run(mintScoped(k(), {}), 'nobody', 'shoes'))).toBe('unauthorized');
  });

  test('a rotation refuses tokens of the old key, though a copy of the dataset was cached', async () => {
    const old = mintScoped(auth.scopedKey({ ...ds, browseRotation: rotation }), {});
    expect(await run(old)).toBe('ds-1'); // now cached
    rotation += 1;
    expect(await code(run(old))).toBe('unauthorized');
    const fresh = mintScoped(auth.scopedKey({ ...ds, browseRotation: rotation }), {});
    expect(await run(fresh)).toBe('ds-1');
  });

  test('admin endpoints answer 403 to a scoped token', async () => {
    const p = await auth.authenticate(`token ${mintScoped(key, {})}`);
    expect(await code(auth.requireOrgAdmin(p, 'acme'))).toBe('forbidden');
    expect(await code(auth.adminDataset(p, 'acme', 'shoes'))).toBe('forbidden');
  });
});
