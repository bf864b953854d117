import { setTimeout as sleep } from 'node:timers/promises';
import { errors, type Client } from '@elastic/elasticsearch';

/**
 * Elasticsearch's default `index.merge.policy.max_merged_segment`: merged no larger than this,
 * a segment stays in the merge policy's hands as writes go on (the caution the force-merge
 * documentation gives for indices still written to).
 */
const MAX_SEGMENT_BYTES = 5 * 1024 ** 3;
const FIRST_POLL_MS = 100;
const MAX_POLL_MS = 2000;

/**
 * Merges an index into as few segments as the merge policy would keep (one per 5 GB of a
 * shard), and waits for the merge while `keepWaiting` answers true. A rewrite of every item
 * leaves many small segments with deleted documents behind, each one more HNSW graph for every
 * kNN search to walk; the merge policy alone leaves dozens. True when the merge finished (or its
 * task is gone), false when `keepWaiting` said to stop first; a merge that failed throws.
 */
export async function mergeSegments(
  client: Client,
  index: string,
  keepWaiting: () => Promise<boolean>,
): Promise<boolean> {
  const stats = await client.indices.stats({ index, metric: ['store', 'docs'], level: 'shards' });
  let largest = 0;
  for (const copies of Object.values(stats.indices?.[index]?.shards ?? {}))
    for (const copy of copies) {
      if (!copy.routing?.primary) continue;
      // the store still holds the rewritten documents' old copies, which the merge drops
      const live = copy.docs?.count ?? 0;
      const all = live + (copy.docs?.deleted ?? 0);
      largest = Math.max(largest, ((copy.store?.size_in_bytes ?? 0) * live) / Math.max(1, all));
    }
  const { task } = await client.indices.forcemerge({
    index,
    max_num_segments: Math.max(1, Math.ceil(largest / MAX_SEGMENT_BYTES)),
    wait_for_completion: false,
  });
  for (let wait = FIRST_POLL_MS; ; wait = Math.min(MAX_POLL_MS, wait * 2)) {
    if (!(await keepWaiting())) return false;
    await sleep(wait);
    let done;
    try {
      done = await client.tasks.get({ task_id: String(task) });
    } catch (e) {
      // the task is gone with the node that ran it: nothing left to wait for
      if (e instanceof errors.ResponseError && e.statusCode === 404) return true;
      throw e;
    }
    if (!done.completed) continue;
    const failed = (done.response as { _shards?: { failed?: number } } | undefined)?._shards
      ?.failed;
    if (done.error || failed)
      throw new Error(
        `Elasticsearch could not merge ${index}: ${done.error?.reason ?? `${failed} shards failed`}`,
      );
    return true;
  }
}
