/**
 * The projections fitted for tuned similarity (contract §20) and the fitting lease. Shared like
 * all state (§12): any worker may fit, every API host ranks with the same stored projection.
 */
export interface TuningStore {
  /** Stores a projection under a new id (ids are never reused, so a read can be cached). */
  putModel(datasetId: string, id: string, bytes: Uint8Array): Promise<void>;
  getModel(datasetId: string, id: string): Promise<Uint8Array | undefined>;
  /** Removes the dataset's projections other than `keep`. */
  pruneModels(datasetId: string, keep: readonly string[]): Promise<void>;
  /** The installation-wide fitting lease: true when `owner` holds it until `until`. */
  claim(owner: string, now: number, until: number): Promise<boolean>;
}
