import { contentStore } from '../../ports/content-store';
import type { EnginePorts } from '../engine-ports';
import { enginePolicy, type PortTimers } from '../port-policy';
import { BulkLane } from './bulk-lane';
import { EsAccountStore } from './es-account-store';
import { EsDuplicateStore } from './es-duplicate-store';
import { EsEventLog } from './es-event-log';
import { EsEventOutbox } from './es-event-outbox';
import { EsKeyStore } from './es-key-store';
import { EsRateCounter } from './es-rate-counter';
import { EsUsageLedger } from './es-usage-ledger';
import { EsWebhookStore } from './es-webhook-store';
import { FieldCatalogues } from './field-catalogue';
import { EsItemCounts } from './item-counts';
import type { EsIndices } from './indices';
import { EsItemProcessing } from './item-processing';
import { EsItemReader } from './item-reader';
import { EsItemWriter } from './item-writer';
import { KnownVersions } from './known-versions';
import { toUnavailable } from './outage';
import { EsSearchEngine } from './search-engine';
import { EsTuningStore } from './es-tuning-store';

/**
 * The Elasticsearch engine's ports on the installation's indices, each under the Elasticsearch
 * outage policy and timed by port when `timers` are given. The composition root and the tests
 * that open an engine build them here, so both run the same policy.
 *
 * Items live one index per dataset (named and created by EsIndices). Their three ports share
 * what this process remembers: the fields of each dataset (a 2 s memo the writer clears) and a
 * worker's realtime read of its item, kept for its result write (KnownVersions). Nothing
 * remembers whether an index exists: another host may create or delete it.
 */
export function esPorts(
  indices: EsIndices,
  opts: {
    /** Dimensions of the embedder's vectors: an item index this host creates has their field. */
    vectorDims: number;
    now?: () => number;
  },
  timers?: PortTimers,
): EnginePorts {
  const port = enginePolicy(toUnavailable, timers);
  const catalogues = new FieldCatalogues(indices, opts.now ?? Date.now);
  const known = new KnownVersions();
  const lane = new BulkLane(() => indices.client);
  return {
    accounts: port('accounts', new EsAccountStore(indices, opts.now ?? Date.now)),
    content: contentStore({
      reader: port('itemReader', new EsItemReader(indices, catalogues, known)),
      writer: port('itemWriter', new EsItemWriter(indices, catalogues, opts.vectorDims)),
      processing: port('itemProcessing', new EsItemProcessing(indices, opts.vectorDims, known)),
    }),
    engine: port('engine', new EsSearchEngine(indices)),
    ledger: port('ledger', new EsUsageLedger(indices, lane)),
    events: port('events', new EsEventLog(indices, opts.now ?? Date.now)),
    counts: port('counts', new EsItemCounts(indices)),
    keys: port('keys', new EsKeyStore(indices)),
    rates: port('rates', new EsRateCounter(indices)),
    webhooks: port('webhooks', new EsWebhookStore(indices)),
    outbox: port('outbox', new EsEventOutbox(indices, lane)),
    duplicates: port('duplicates', new EsDuplicateStore(indices)),
    tuning: port('tuning', new EsTuningStore(indices)),
  };
}
