/** Within the 2 s consistency window of contract §12. */
const READY_MEMO_MS = 1000;

/**
 * Datasets found ready for the Vision API (enough processed items, contract §2), taken as ready
 * for a moment: on Elasticsearch the check is a count search before each request's own work.
 * "Not ready" is never kept, so a dataset becoming ready shows at once; this host's own content
 * writes forget the dataset, so a delete or a url change here shows at once too; another host's
 * shows within READY_MEMO_MS.
 */
export class ReadinessMemo {
  private readonly until = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  isReady(datasetId: string): boolean {
    return (this.until.get(datasetId) ?? 0) > this.now();
  }

  markReady(datasetId: string): void {
    if (this.until.size >= 10_000) this.until.clear();
    this.until.set(datasetId, this.now() + READY_MEMO_MS);
  }

  forget(datasetId: string): void {
    this.until.delete(datasetId);
  }
}
