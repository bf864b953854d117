import path from 'node:path';
import { openDb, type Db } from '../../src/adapters/embedded/db';
import { SqliteUsageLedger } from '../../src/adapters/embedded/usage-ledger';
import { tempDir } from '../helpers/app';

let db: Db;
let ledger: SqliteUsageLedger;
beforeEach(() => {
  db = openDb(path.join(tempDir('vss-ledger-'), 'store.db'));
  ledger = new SqliteUsageLedger(db);
});
afterEach(() => db.close());

test('concurrent image events share one commit, each settles once stored, and a failed commit fails them all', async () => {
  const ev = (item: string) => ({
    org: 'o',
    datasetId: 'd',
    itemId: item,
    url: `u-${item}`,
    at: Date.parse('2026-07-01T00:00:00Z'),
    processedAt: 1,
  });
  const original = db.transaction.bind(db);
  let transactions = 0;
  db.transaction = ((fn: Parameters<Db['transaction']>[0]) => {
    transactions++;
    return original(fn);
  }) as Db['transaction'];
  const calls = [...Array.from({ length: 20 }, (_, i) => ev(`i${i}`)), ev('i3'), ev('i3')];
  await Promise.all(calls.map((c) => ledger.recordImage(c)));
  db.transaction = original;
  expect(transactions).toBe(1);
  expect((await ledger.images('o', 2026)).processed).toBe(20); // the repeats counted once

  db.close(); // the store goes away: every waiting event is refused, none silently dropped
  const failed = await Promise.allSettled([
    ledger.recordImage(ev('x')),
    ledger.recordImage(ev('y')),
  ]);
  expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  db = openDb(path.join(tempDir('vss-ledger-'), 'store.db')); // for afterEach
});

test('images counted before per-processing keys keep counting once after the migration', () => {
  // A store at the previous schema version with one counted image and one open reservation.
  const file = path.join(tempDir('vss-ledger-'), 'old.db');
  const old = openDb(file);
  old.pragma('user_version = 5');
  // Undo what the later migrations made, so each of them runs again as on a real old store.
  old.exec(
    `DROP TABLE image_counts; DROP TABLE events; ALTER TABLE items DROP COLUMN image_processed_at;
     DROP TABLE item_changes; DROP TABLE change_heads;
     DROP INDEX it_item_term; CREATE INDEX it_item ON item_terms(item_pk);
     DROP TABLE item_counts; ALTER TABLE items DROP COLUMN popularity;
     ALTER TABLE items DROP COLUMN purchases;
     DELETE FROM item_values WHERE field IN ('service_popularity', 'service_purchases');
     DROP TABLE webhooks; DROP TABLE webhook_facts; DROP TABLE webhook_deliveries; DROP TABLE outbox_state;
     DROP INDEX items_pixel_hash; ALTER TABLE items DROP COLUMN image_pixel_hash;
     DROP TABLE duplicate_entries; DROP TABLE duplicate_dismissals; DROP TABLE duplicate_state;
     ALTER TABLE items DROP COLUMN image_copy_signature;
     ALTER TABLE datasets DROP COLUMN similarity; DROP TABLE tuning_models; DROP TABLE tuning_lease;`,
  );
  old
    .prepare(
      'INSERT INTO image_events (dataset_id, item_id, url, org, year, at, counted) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
    .run('d', 'i1', 'u1', 'o', 2026, 1, 1);
  old
    .prepare(
      'INSERT INTO image_events (dataset_id, item_id, url, org, year, at, counted) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
    .run('d', 'i2', 'u2', 'o', 2026, 2, 0);
  old.close();
  const migrated = openDb(file);
  const l = new SqliteUsageLedger(migrated);
  return (async () => {
    expect(await l.images('o', 2026)).toEqual({ processed: 1, lastAt: 1 });
    // a redelivery of the old processing (its item reads processedAt 0) is not counted again
    await l.recordImage({
      org: 'o',
      datasetId: 'd',
      itemId: 'i1',
      url: 'u1',
      at: 5,
      processedAt: 0,
    });
    expect((await l.images('o', 2026)).processed).toBe(1);
    migrated.close();
  })();
});
