/**
 * One set of cases for every AccountStore and KeyStore adapter, each case playing two hosts of
 * one installation where sharing is the point (contract §12).
 */
import { DEFAULT_PLAN } from '../../src/domain/plan';

const defaultPlan = () => structuredClone(DEFAULT_PLAN);
import type { TokenRecord } from '../../src/ports/account-store';
import { ENGINES, datasetRecord, twoHosts, type Host } from './engines';

const ds = datasetRecord;

const token = (prefix: string, extra: Partial<TokenRecord> = {}): TokenRecord => ({
  prefix,
  kind: 'org',
  org: 'acme',
  hash: 'ab'.repeat(32),
  createdAt: `2026-01-01T00:00:0${prefix.length % 10}.000Z`,
  ...extra,
});

describe.each(ENGINES)('AccountStore on %s', (_name, open) => {
  const hosts = twoHosts(open);
  let a: Host;
  let b: Host;
  beforeEach(() => ({ a, b } = hosts));

  test('an organisation made on one host is seen on the other at once; names are unique', async () => {
    const org = { name: 'acme', plan: defaultPlan(), createdAt: '2026-01-01T00:00:00.000Z' };
    const results = await Promise.all([a.accounts.createOrg(org), b.accounts.createOrg(org)]);
    expect(results.sort()).toEqual([false, true]);
    expect(await b.accounts.getOrg('acme')).toEqual(org);
    expect(await a.accounts.getOrg('nope')).toBeUndefined();
  });

  test('a new plan replaces the old one whole', async () => {
    const fixed = {
      ...defaultPlan(),
      images: { limitType: 'fixed' as const, limit: 10 },
    };
    await a.accounts.createOrg({ name: 'acme', plan: fixed, createdAt: 'x' });
    expect(await b.accounts.updatePlan('acme', defaultPlan())).toBe(true);
    expect((await a.accounts.getOrg('acme'))!.plan).toEqual(defaultPlan());
    expect(await b.accounts.updatePlan('nope', defaultPlan())).toBe(false);
  });

  test('tokens: minted on one host work on the other at once, revoked ones nowhere', async () => {
    await a.accounts.putToken(token('org_aaaaaaaaaaaa'));
    await a.accounts.putToken(token('org_bbbbbbbbbbb', { org: 'other' }));
    await a.accounts.putToken(token('ds_cccccccccccc', { kind: 'ds', datasetId: 'd1' }));
    expect(await b.accounts.findToken('org_aaaaaaaaaaaa')).toEqual(token('org_aaaaaaaaaaaa'));
    expect((await b.accounts.listTokens('acme')).map((t) => t.prefix)).toEqual([
      'org_aaaaaaaaaaaa',
    ]);
    // only the organisation's own org tokens can be revoked through it
    expect(await b.accounts.deleteToken('other', 'org_aaaaaaaaaaaa')).toBe(false);
    expect(await b.accounts.deleteToken('acme', 'ds_cccccccccccc')).toBe(false);
    expect(await b.accounts.deleteToken('acme', 'org_aaaaaaaaaaaa')).toBe(true);
    expect(await a.accounts.findToken('org_aaaaaaaaaaaa')).toBeUndefined();
    expect(await a.accounts.deleteToken('acme', 'org_aaaaaaaaaaaa')).toBe(false);
    await b.accounts.removeToken('ds_cccccccccccc');
    expect(await a.accounts.findToken('ds_cccccccccccc')).toBeUndefined();
    await b.accounts.removeToken('ds_cccccccccccc'); // already gone: no error
  });

  test('datasets: one name per organisation, even when two hosts create it at once', async () => {
    const made = await Promise.all([
      a.accounts.createDataset(ds('id-1', 'shoes')),
      b.accounts.createDataset(ds('id-2', 'shoes')),
      b.accounts.createDataset(ds('id-3', 'shoes', 'other')),
    ]);
    expect(made.filter(Boolean)).toHaveLength(2);
    const winner = (await a.accounts.getDataset('acme', 'shoes'))!;
    expect(['id-1', 'id-2']).toContain(winner.id);
    expect(await b.accounts.getDatasetById(winner.id)).toEqual(winner);
    const loser = winner.id === 'id-1' ? 'id-2' : 'id-1';
    expect(await b.accounts.getDatasetById(loser)).toBeUndefined();
    expect(winner).toMatchObject({ name: 'shoes', settings: { version: 1 } });
    await a.accounts.createDataset(ds('id-4', 'bags'));
    expect((await b.accounts.listDatasets('acme')).map((d) => d.name)).toEqual(['bags', 'shoes']);
  });

  test('a deleted dataset frees its name, takes its tokens along and stays listed as deleted', async () => {
    await a.accounts.createDataset(ds('id-1', 'shoes'));
    await a.accounts.putToken(token('ds_dddddddddddd', { kind: 'ds', datasetId: 'id-1' }));
    await b.accounts.markDatasetDeleted('id-1', '2026-02-01T00:00:00.000Z');
    expect(await a.accounts.getDataset('acme', 'shoes')).toBeUndefined();
    expect(await a.accounts.getDatasetById('id-1')).toBeUndefined();
    expect(await a.accounts.findToken('ds_dddddddddddd')).toBeUndefined();
    expect(await a.accounts.listDatasets('acme')).toEqual([]);
    expect((await a.accounts.listDeletedDatasets('acme')).map((d) => d.id)).toEqual(['id-1']);
    expect(await a.accounts.createDataset(ds('id-2', 'shoes'))).toBe(true);
    expect((await b.accounts.getDataset('acme', 'shoes'))!.id).toBe('id-2');
  });

  test('settings versions and browse rotations count every concurrent change once', async () => {
    await a.accounts.createDataset(ds('id-1', 'shoes'));
    const hosts = [a, b, a, b, a, b];
    const versions = await Promise.all(
      hosts.map((h, i) => h.accounts.updateEnabledFields('id-1', { [`f${i}`]: ['v'] })),
    );
    expect(versions.sort()).toEqual([2, 3, 4, 5, 6, 7]);
    expect((await b.accounts.getDatasetById('id-1'))!.settings.version).toBe(7);
    const rotations = await Promise.all(hosts.map((h) => h.accounts.bumpBrowseRotation('id-1')));
    expect(rotations.sort()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await a.accounts.browseRotation('id-1')).toBe(6);
  });

  test('adopting an embedder changes only the datasets made with another one', async () => {
    await a.accounts.createDataset(ds('id-1', 'shoes'));
    await a.accounts.createDataset({
      ...ds('id-2', 'bags'),
      embedder: { id: 'emb-b', dimensions: 4 },
    });
    const changed = await b.accounts.adoptEmbedder({ id: 'emb-b', dimensions: 4 });
    expect(changed.map((d) => [d.id, d.previous])).toEqual([
      ['id-1', { id: 'emb-a', dimensions: 8 }],
    ]);
    expect((await a.accounts.getDatasetById('id-1'))!.embedder).toEqual({
      id: 'emb-b',
      dimensions: 4,
    });
    expect(await a.accounts.adoptEmbedder({ id: 'emb-b', dimensions: 4 })).toEqual([]);
  });

  test('installation values: of hosts claiming at once, one wins and all read its value', async () => {
    const claims = await Promise.all([
      a.accounts.claimMeta('k', 'from-a'),
      b.accounts.claimMeta('k', 'from-b'),
    ]);
    expect(claims[0]).toBe(claims[1]);
    expect(await a.accounts.getMeta('k')).toBe(claims[0]);
    expect(await a.accounts.getMeta('missing')).toBeUndefined();
  });

  test('the server key is made once and is the same on every host', async () => {
    const [ka, kb] = await Promise.all([a.keys.serverKey(), b.keys.serverKey()]);
    expect(ka).toHaveLength(32);
    expect(ka.equals(kb)).toBe(true);
    const c = await hosts.inst.host();
    expect((await c.keys.serverKey()).equals(ka)).toBe(true);
  });
});
