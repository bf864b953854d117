/** Longest stretch of background work without giving the event loop a turn. */
const SLICE_MS = 15;

/**
 * Gives the event loop a turn once `sliceMs` of work has passed: loading or indexing a large
 * dataset's vectors takes seconds to a minute, and an embedded installation's API shares the
 * process (better-sqlite3 is synchronous, so nothing else runs until the work yields).
 */
export function slicer(sliceMs = SLICE_MS): () => Promise<void> | undefined {
  let since = performance.now();
  return () => {
    if (performance.now() - since < sliceMs) return undefined;
    return new Promise<void>((go) =>
      setImmediate(() => {
        since = performance.now();
        go();
      }),
    );
  };
}
