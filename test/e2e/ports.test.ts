/**
 * Which adapter serves every port, per configuration: the production project fails here if
 * anything silently falls back to the embedded engine (contract §12).
 */
import { describePorts } from '../../src/app/container';
import { QUEUE, SEARCH_BACKEND, startTestApp } from '../helpers/app';

const EXPECTED: Record<string, Record<string, string>> = {
  embedded: {
    accounts: 'EmbeddedAccountStore',
    itemReader: 'EmbeddedItemReader',
    itemWriter: 'EmbeddedItemWriter',
    itemProcessing: 'EmbeddedItemProcessing',
    engine: 'EmbeddedSearchEngine',
    ledger: 'SqliteUsageLedger',
    events: 'SqliteEventLog',
    keys: 'FileKeyStore',
    rates: 'MemoryRateCounter',
    webhooks: 'SqliteWebhookStore',
    outbox: 'SqliteEventOutbox',
  },
  elasticsearch: {
    accounts: 'EsAccountStore',
    itemReader: 'EsItemReader',
    itemWriter: 'EsItemWriter',
    itemProcessing: 'EsItemProcessing',
    engine: 'EsSearchEngine',
    ledger: 'EsUsageLedger',
    events: 'EsEventLog',
    keys: 'EsKeyStore',
    rates: 'EsRateCounter',
    webhooks: 'EsWebhookStore',
    outbox: 'EsEventOutbox',
  },
};
const QUEUES: Record<string, string> = { inprocess: 'SqliteJobQueue', rabbitmq: 'AmqpJobQueue' };
const BUSES: Record<string, string> = { inprocess: 'SqliteEventBus', rabbitmq: 'AmqpEventBus' };

test(`every port of every process is served by the ${SEARCH_BACKEND} engine and the ${QUEUE} queue`, async () => {
  const t = await startTestApp();
  try {
    expect(t.hosts.length).toBe(SEARCH_BACKEND === 'elasticsearch' ? 4 : 1);
    for (const h of t.hosts)
      expect(describePorts(h.container)).toEqual({
        ...EXPECTED[SEARCH_BACKEND],
        queue: QUEUES[QUEUE],
        bus: BUSES[QUEUE],
      });
  } finally {
    await t.stop();
  }
});
