/** An item a worker finished: processed from `url`, or failed for good. */
export interface ItemOutcome {
  org: string;
  datasetId: string;
  itemId: string;
  url: string;
  kind: 'processed' | 'failed';
  at: number;
  /**
   * Names this processing of the item (its processedAt, or the updatedAt of the version that
   * failed): a redelivered job reports the same outcome under the same name.
   */
  version: number;
  error?: { code: string; message: string };
}

/**
 * Told of every item outcome inside the job, before it is acknowledged: a sink that must not
 * lose one (the webhook outbox) resolves only once it is durable; the job is redelivered
 * otherwise. A best-effort sink (live progress) returns at once.
 */
export interface OutcomeSink {
  record(o: ItemOutcome): Promise<void>;
}

/** Every sink, at once; the job waits for the slowest. */
export function allSinks(sinks: readonly OutcomeSink[]): OutcomeSink {
  return {
    async record(o) {
      await Promise.all(sinks.map((s) => s.record(o)));
    },
  };
}
