import { createHash } from 'node:crypto';

/**
 * A dismissed set's key (contract §18): the same ids in any order or repetition name one record,
 * short enough for a document id whatever the ids' lengths.
 */
export function dismissalKey(ids: readonly string[]): string {
  const sorted = [...new Set(ids)].sort();
  return createHash('sha256').update(JSON.stringify(sorted)).digest('base64url');
}
