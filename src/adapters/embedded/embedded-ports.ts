import { contentStore, type ContentStore } from '../../ports/content-store';
import type { EnginePorts } from '../engine-ports';
import { enginePolicy, type PortTimers } from '../port-policy';
import { EmbeddedAccountStore } from './account-store';
import { sqliteOutage, type Db } from './db';
import { SqliteDuplicateStore } from './duplicate-store';
import { SqliteEventLog } from './event-log';
import { SqliteEventOutbox } from './event-outbox';
import { FileKeyStore } from './file-key-store';
import { SqliteItemCounts } from './item-counts';
import { MemoryRateCounter } from './rate-counter';
import { EmbeddedItemProcessing } from './item-processing';
import { EmbeddedItemReader } from './item-reader';
import { EmbeddedItemWriter } from './item-writer';
import { EmbeddedSearchEngine } from './search-engine';
import { SqliteUsageLedger } from './usage-ledger';
import { SqliteWebhookStore } from './webhook-store';
import { EmbeddedTuningStore } from './tuning-store';

/**
 * The embedded engine's ports on one SQLite file (and the server key beside it in `dataDir`),
 * each under the SQLite outage policy and timed by port when `timers` are given. The composition
 * root and the tests that open an engine build them here, so both run the same policy.
 */
export function embeddedPorts(db: Db, dataDir: string, timers?: PortTimers): EnginePorts {
  const port = enginePolicy(sqliteOutage, timers);
  return {
    accounts: port('accounts', new EmbeddedAccountStore(db)),
    content: embeddedContent(db, timers),
    engine: port('engine', new EmbeddedSearchEngine(db)),
    ledger: port('ledger', new SqliteUsageLedger(db)),
    events: port('events', new SqliteEventLog(db)),
    counts: port('counts', new SqliteItemCounts(db)),
    keys: port('keys', new FileKeyStore(dataDir)),
    rates: port('rates', new MemoryRateCounter()),
    webhooks: port('webhooks', new SqliteWebhookStore(db)),
    outbox: port('outbox', new SqliteEventOutbox(db)),
    duplicates: port('duplicates', new SqliteDuplicateStore(db)),
    tuning: port('tuning', new EmbeddedTuningStore(db)),
  };
}

/** The item ports of embeddedPorts alone (for callers that only write and read items). */
export function embeddedContent(db: Db, timers?: PortTimers): ContentStore {
  const port = enginePolicy(sqliteOutage, timers);
  return contentStore({
    reader: port('itemReader', new EmbeddedItemReader(db)),
    writer: port('itemWriter', new EmbeddedItemWriter(db)),
    processing: port('itemProcessing', new EmbeddedItemProcessing(db)),
  });
}
