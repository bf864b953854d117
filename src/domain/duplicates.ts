/**
 * Near-duplicate report (contract §18): what both engines share.
 */

/**
 * Items in order of their pixel hash, then id → the runs of one hash as groups of ids (each in
 * the rows' order); a run of one item is no group.
 */
export function groupRuns(rows: ReadonlyArray<{ id: string; hash: string }>): string[][] {
  const groups: string[][] = [];
  let run: string[] = [];
  let hash: string | undefined;
  for (const r of rows) {
    if (r.hash !== hash) {
      if (run.length > 1) groups.push(run);
      run = [];
      hash = r.hash;
    }
    run.push(r.id);
  }
  if (run.length > 1) groups.push(run);
  return groups;
}
