import type { EnginePorts } from '../engine-ports';
import { enginePolicy, type PortTimers } from '../port-policy';
import { EsAccountStore } from './es-account-store';
import { EsEventLog } from './es-event-log';
import { EsKeyStore } from './es-key-store';
import { ElasticsearchStore } from './es-store';
import { EsUsageLedger } from './es-usage-ledger';
import type { EsIndices } from './indices';
import { toUnavailable } from './outage';

/**
 * The Elasticsearch engine's ports on the installation's indices, each under the Elasticsearch
 * outage policy and timed by port when `timers` are given. The composition root and the tests
 * that open an engine build them here, so both run the same policy.
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
  const store = new ElasticsearchStore(indices, opts.now ?? Date.now, opts.vectorDims);
  return {
    accounts: port('accounts', new EsAccountStore(indices)),
    content: port('content', store),
    engine: port('engine', store),
    ledger: port('ledger', new EsUsageLedger(indices)),
    events: port('events', new EsEventLog(indices)),
    keys: port('keys', new EsKeyStore(indices)),
  };
}
