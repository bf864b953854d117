/**
 * The Elasticsearch account store and usage ledger in the cases only they have: a shared index
 * that cannot answer, and an index that never refreshes by itself. The cases every engine shares
 * are in test/contract/account-store and usage-ledger.
 */
import { datasetRecord, esInstallation, twoHosts } from '../../contract/engines';

const at = (iso: string): number => Date.parse(iso);
const ds = datasetRecord;

describe('AccountStore on Elasticsearch, while a shard cannot answer', () => {
  const hosts = twoHosts(esInstallation);

  test('a dataset record that cannot be read is a 503, not a dataset missing from the list', async () => {
    const { a } = hosts;
    await a.accounts.createDataset(ds('d1', 'shoes'));
    await a.accounts.createDataset(ds('d2', 'boots'));
    expect((await a.accounts.listDatasets('acme')).map((d) => d.name)).toEqual(['boots', 'shoes']);
    // a closed index answers every document of an mget with an error of its own
    const { client, indices } = a.es!;
    await client.indices.close({ index: indices.shared('datasets') });
    await expect(a.accounts.listDatasets('acme')).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('UsageLedger on Elasticsearch', () => {
  const hosts = twoHosts(esInstallation);
  const img = (item: string) => ({
    org: 'o',
    datasetId: 'd',
    itemId: item,
    url: 'u',
    at: at('2026-03-01T00:00:00Z'),
    processedAt: 1,
  });

  test('image counts are exact at once though their index never refreshes by itself', async () => {
    const { a, b } = hosts;
    const { client, indices } = a.es!;
    const index = indices.shared('images');
    const interval = async () =>
      Object.values(await client.indices.getSettings({ index }))[0]?.settings?.index
        ?.refresh_interval;
    expect(await interval()).toBe('-1');
    // an index made by an earlier release refreshed every second; a start switches it
    await client.indices.putSettings({ index, settings: { index: { refresh_interval: '1s' } } });
    await indices.ensureShared(); // what every process does at start
    expect(await interval()).toBe('-1');
    for (let i = 0; i < 5; i++) await (i % 2 ? a : b).ledger.recordImage(img(`n${i}`));
    expect((await b.ledger.images('o', 2026)).processed).toBe(5);
  });
});
