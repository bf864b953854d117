import { LIMITS } from '../domain/limits';
import { RecentReads } from '../lib/recent-reads';

/** Within the 2 s consistency window of contract §12. */
const READY_MEMO_MS = 1000;

/**
 * Processed-item counts of datasets found ready for the Vision API (contract §2), taken as
 * they were for a moment: on Elasticsearch the count is a search before each request's own
 * work. A count below the threshold is never kept, so a dataset becoming ready shows at once;
 * this host's own content writes forget the dataset, so a delete or a url change here shows at
 * once too; another host's shows within READY_MEMO_MS.
 */
export class ReadinessMemo extends RecentReads<number> {
  constructor(now: () => number = Date.now) {
    super(READY_MEMO_MS, now, (n) => n !== undefined && n >= LIMITS.minProcessedForVision);
  }
}
