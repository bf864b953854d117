/** Items a worker just finished, for live subscribers (contract §17 subscriptions). */
export interface ProgressNotice {
  org: string;
  datasetId: string;
  type: 'items.processed' | 'items.failed';
  itemIds: string[];
  at: number;
}

/**
 * Live, best-effort fan-out of progress notices from workers on any host to every API process.
 * Not durable: a subscriber reads absolute counts with each event, so a notice lost in an
 * outage heals with the next one (the webhook outbox is what guarantees delivery).
 */
export interface EventBus {
  /** Sends to every process subscribed now; never throws (a lost notice is only counted). */
  publish(notices: ProgressNotice[]): Promise<void>;
  /** Receives every notice published from now on, by any process; returns the unsubscribe. */
  subscribe(on: (n: ProgressNotice) => void): () => void;
  close(): Promise<void>;
}
